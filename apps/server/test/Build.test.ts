import { describe, expect, it } from "@effect/vitest"
import { readFileSync } from "node:fs"
import { join } from "node:path"

const dist = join(import.meta.dirname, "..", "dist")

interface Meta {
  readonly outputs: Record<string, {
    readonly imports: ReadonlyArray<{ readonly path: string; readonly kind: string; readonly external?: boolean }>
    readonly inputs: Record<string, unknown>
  }>
}

const meta = (): Meta => JSON.parse(readFileSync(join(dist, "meta.json"), "utf8")) as Meta

/** Every output file and external module `dist/main.js` loads before any command runs (static imports only). */
const loadedAtStart = (build: Meta) => {
  const files = new Set<string>()
  const externals = new Set<string>()
  const visit = (file: string) => {
    if (files.has(file)) return
    files.add(file)
    for (const imported of build.outputs[file]?.imports ?? []) {
      if (imported.kind === "dynamic-import") continue
      if (imported.external === true) externals.add(imported.path)
      else visit(imported.path)
    }
  }
  visit("dist/main.js")
  return { externals, inputs: [...files].flatMap((file) => Object.keys(build.outputs[file]?.inputs ?? {})) }
}

describe("the build (dist/, made by nx build)", () => {
  it("\"--help loads no database driver, no PGlite, no HTTP server\": none of them is in what main.js loads before a command runs", () => {
    const { externals, inputs } = loadedAtStart(meta())
    for (const driver of ["/node_modules/pg/", "/node_modules/@effect/sql-pg/", "/node_modules/undici/", "/node_modules/ws/"]) {
      expect(inputs.filter((input) => input.includes(driver))).toEqual([])
    }
    expect(inputs.filter((input) => input.includes("/libs/store/") || input.endsWith("Server.ts"))).toEqual([])
    for (const module of ["@electric-sql/pglite", "http", "node:http", "https", "node:https", "net", "node:net"]) {
      expect(externals.has(module)).toBe(false)
    }
  })

  it("PGlite stays outside the bundle (its WebAssembly and data files are found next to its own module)", () => {
    const build = meta()
    const inputs = Object.values(build.outputs).flatMap((output) => Object.keys(output.inputs))
    expect(inputs.filter((input) => input.includes("@electric-sql/pglite"))).toEqual([])
  })

  it("one copy of undici is bundled", () => {
    const build = meta()
    const copies = new Set(
      Object.values(build.outputs).flatMap((output) => Object.keys(output.inputs))
        .map((input) => /^(.*node_modules\/undici)\//.exec(input)?.[1])
        .filter((copy) => copy !== undefined)
    )
    expect(copies.size).toBe(1)
  })

  it("the binary runs the build, never the sources through tsx", () => {
    const bin = readFileSync(join(import.meta.dirname, "..", "bin", "crm-relay.js"), "utf8")
    expect(bin).toContain("../dist/main.js")
    expect(bin).not.toContain("tsx")
  })
})
