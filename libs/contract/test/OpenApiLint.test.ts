/**
 * The committed OpenAPI documents are ones tools accept: Redocly's
 * `recommended` rules find no error and no warning in any of them, each
 * declares its server as the contract names the address, and every
 * operation has a summary.
 */
import { describe, expect, it } from "@effect/vitest"
import { createConfig, lint } from "@redocly/openapi-core"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { DOCUMENTS } from "../src/OpenApiDocuments.js"

const pathOf = (file: string) => join(import.meta.dirname, "..", "openapi", file)

/** The server variable each document's address is: the bridge contract's `{bridge_base_url}`, the Event API's `{base_url}`. */
const ADDRESS: Record<keyof typeof DOCUMENTS, string> = {
  "crm-bridge.openapi.json": "bridge_base_url",
  "event-api.openapi.json": "base_url",
  "internal-api.openapi.json": "base_url",
  "portal-api.openapi.json": "base_url"
}

interface Spec {
  readonly servers?: ReadonlyArray<{ readonly url: string; readonly variables?: Record<string, { readonly default: string }> }>
  readonly paths: Record<string, Record<string, { readonly summary?: string }>>
}

describe("OpenAPI documents under Redocly's recommended rules", () => {
  for (const file of Object.keys(DOCUMENTS) as Array<keyof typeof DOCUMENTS>) {
    it(`${file}: no error and no warning`, async () => {
      const config = await createConfig({ extends: ["recommended"] })
      const problems = await lint({ ref: pathOf(file), config })
      expect(problems.map((p) => `${p.severity} ${p.ruleId}: ${p.message} (${p.location[0]?.pointer ?? ""})`)).toEqual([])
    })

    it(`${file}: its one server is {${ADDRESS[file]}}, as the contract names the address, and every operation has a summary`, () => {
      const spec = JSON.parse(readFileSync(pathOf(file), "utf8")) as Spec
      const variable = ADDRESS[file]
      expect(spec.servers?.map((s) => s.url)).toEqual([`{${variable}}`])
      expect(spec.servers?.[0]?.variables?.[variable]?.default).toMatch(/^https?:\/\//)
      const operations = Object.entries(spec.paths).flatMap(([path, methods]) =>
        Object.entries(methods).map(([method, operation]) => [`${method} ${path}`, operation.summary] as const)
      )
      expect(operations.length).toBeGreaterThan(0)
      expect(operations.filter(([, summary]) => summary === undefined || summary.trim() === "").map(([name]) => name)).toEqual([])
    })
  }
})
