/**
 * The API reference on the internal port: the three OpenAPI documents as
 * committed, and a browsable page for each; none of it on the public port,
 * which serves exactly the Event API's three pairs.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { request, TestServerLive, urls } from "./support/TestServer.js"

const committed = (file: string) =>
  readFileSync(join(import.meta.dirname, "..", "..", "..", "libs", "contract", "openapi", file), "utf8")

const FILES = ["internal-api.openapi.json", "event-api.openapi.json", "crm-bridge.openapi.json", "portal-api.openapi.json"] as const

describe("API reference on the internal port", () => {
  it.layer(TestServerLive)((it) => {
    it.effect("GET /openapi/<file> answers each committed OpenAPI document, byte for byte, as JSON", () =>
      Effect.gen(function*() {
        const u = yield* urls
        for (const file of FILES) {
          const answer = yield* request("GET", `${u.admin}/openapi/${file}`)
          expect(answer.status).toBe(200)
          expect(answer.headers.get("content-type")).toMatch(/^application\/json/)
          expect(answer.text).toBe(committed(file))
        }
      }))

    it.effect("GET /docs, /docs/event-api, /docs/crm-bridge and /docs/portal-api are reference pages of their API, with no script from elsewhere", () =>
      Effect.gen(function*() {
        const u = yield* urls
        const titles = {
          "/docs": "crm-relay internal API", "/docs/event-api": "crm-relay Event API", "/docs/crm-bridge": "Custom CRM Bridge Contract",
          "/docs/portal-api": "crm-relay Integrations area API"
        } as const
        for (const [path, title] of Object.entries(titles)) {
          const page = yield* request("GET", `${u.admin}${path}`)
          expect(page.status).toBe(200)
          expect(page.headers.get("content-type")).toMatch(/^text\/html/)
          expect(page.text).toContain(`<title>${title}`)
          expect(page.text).not.toMatch(/<script[^>]+src=/)
        }
      }))

    it.effect("Event API: \"every other path or method is 404\" — the public port serves no reference", () =>
      Effect.gen(function*() {
        const u = yield* urls
        for (const path of ["/docs", "/openapi/event-api.openapi.json", "/docs/event-api"]) {
          expect((yield* request("GET", `${u.public}${path}`)).status).toBe(404)
        }
      }))
  })
})
