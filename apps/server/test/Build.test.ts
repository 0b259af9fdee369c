import { describe, expect, it } from "@effect/vitest"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import * as Vm from "node:vm"

const dist = join(import.meta.dirname, "..", "dist")

interface Meta {
  readonly outputs: Record<string, {
    readonly imports: ReadonlyArray<{ readonly path: string; readonly kind: string; readonly external?: boolean }>
    readonly inputs: Record<string, unknown>
    readonly entryPoint?: string
  }>
}

const meta = (): Meta => JSON.parse(readFileSync(join(dist, "meta.json"), "utf8")) as Meta

/** Every output file and external module `entry` loads before it runs (static imports only); `dist/main.js`: before any command runs. */
const loadedAtStart = (build: Meta, entry = "dist/main.js") => {
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
  visit(entry)
  return { externals, inputs: [...files].flatMap((file) => Object.keys(build.outputs[file]?.inputs ?? {})) }
}

/** What `entryPoint`'s own chunk loads before it runs (static imports only). */
const loadedBy = (build: Meta, entryPoint: string) => {
  const chunk = Object.entries(build.outputs).find(([, output]) => output.entryPoint === entryPoint)?.[0]
  expect(chunk).toBeDefined()
  return loadedAtStart(build, chunk)
}

/** What `crm-relay serve` loads before it runs: dist/serve.js, one script (bin/crm-relay.js runs it for `serve` alone). */
const loadedByServe = (build: Meta) => {
  expect(build.outputs["dist/serve.js"]).toBeDefined()
  return loadedAtStart(build, "dist/serve.js")
}

/** What `crm-relay --help` (or any command but `serve`) loads before it runs: main.js, then the command line's chunk. */
const loadedForCommands = (build: Meta) => {
  const main = loadedAtStart(build)
  const cli = loadedBy(build, "src/cli/Cli.ts")
  return { externals: new Set([...main.externals, ...cli.externals]), inputs: [...main.inputs, ...cli.inputs] }
}

describe("the build (dist/, made by nx build)", () => {
  it("\"--help loads no database driver, no PGlite, no HTTP server\": none of them is in what main.js and the command line load before a command runs", () => {
    const { externals, inputs } = loadedForCommands(meta())
    // The command line itself is there: this looks at what --help really loads.
    expect(inputs.some((input) => input.endsWith("src/cli/Cli.ts"))).toBe(true)
    for (const driver of ["/node_modules/pg/", "/node_modules/@effect/sql-pg/", "/node_modules/undici/", "/node_modules/ws/"]) {
      expect(inputs.filter((input) => input.includes(driver))).toEqual([])
    }
    // Of the store, only its record of the V8 flags the process sets (config/Heap's among them): a few lines over node:v8;
    // and what the single executable carries (--version reads the release's commit there): a few lines over a global.
    const small = ["/libs/store/src/V8Flags.ts", "/libs/store/src/Carried.ts"]
    expect(inputs.filter((input) => (input.includes("/libs/store/") && !small.some((file) => input.endsWith(file))) || input.endsWith("Server.ts")))
      .toEqual([])
    for (const module of ["@electric-sql/pglite", "http", "node:http", "https", "node:https", "net", "node:net"]) {
      expect(externals.has(module)).toBe(false)
    }
  })

  it("\"Nothing imported for one command is loaded for another\": --help loads no YAML, TOML or INI parser, no fast-check, no API reference page", () => {
    // A barrel import (`import { Effect } from "effect"`) once made every module some lazily loaded chunk used load up front.
    const { inputs } = loadedForCommands(meta())
    for (const unused of ["/node_modules/yaml/", "/node_modules/toml/", "/node_modules/ini/", "/fast-check/", "/internal/httpApiScalar.js"]) {
      expect(inputs.filter((input) => input.includes(unused))).toEqual([])
    }
  })

  it("`crm-relay serve` loads no command-line parser: its script (dist/serve.js), and the serve command's chunk main.js would load, hold no @effect/cli and no other command", () => {
    const build = meta()
    for (const inputs of [loadedByServe(build).inputs, [...loadedAtStart(build).inputs, ...loadedBy(build, "src/cli/Serve.ts").inputs]]) {
      expect(inputs.some((input) => input.endsWith("src/http/Server.ts") || input.endsWith("src/cli/Serve.ts"))).toBe(true)
      expect(inputs.filter((input) => input.includes("/node_modules/@effect/cli/") || input.includes("/node_modules/@effect/printer"))).toEqual([])
      expect(inputs.filter((input) => /\/src\/cli\/(Cli|Help|[A-Za-z]+Cli)\.ts$/.test(input))).toEqual([])
    }
  })

  it("dist/serve.js is a script (V8 caches a script's code after it ran; a module's, never): no import, export, import() or import.meta", () => {
    const build = meta()
    const output = build.outputs["dist/serve.js"]!
    expect(output.imports.filter((imported) => imported.kind !== "require-call")).toEqual([])
    // Compiled as bin/crm-relay.js compiles it: a module's syntax would not compile.
    const source = readFileSync(join(dist, "serve.js"), "utf8")
    expect(typeof new Vm.Script(source).runInThisContext()).toBe("function")
    expect(source).not.toContain("import.meta")
  })

  it("serve loads the API reference page (3 MB of script) only when it is asked for", () => {
    const build = meta()
    for (const { inputs } of [loadedBy(build, "src/http/Server.ts"), loadedByServe(build)]) {
      expect(inputs.filter((input) => input.endsWith("Server.ts"))).toHaveLength(1)
      expect(inputs.filter((input) => input.includes("/internal/httpApiScalar.js") || input.includes("/fast-check/"))).toEqual([])
    }
    // The script's copy of the page is a file of its own, read on first use.
    expect(Object.keys(build.outputs["dist/vendor/scalar.cjs"]?.inputs ?? {}).some((input) => input.endsWith("/internal/httpApiScalar.js"))).toBe(true)
  })

  it("serve reads no undici, ws or mime code at start: each is a file of its own (dist/vendor) that loads on first use", () => {
    const build = meta()
    for (const { inputs } of [loadedBy(build, "src/http/Server.ts"), loadedByServe(build)]) {
      for (const lazy of ["/node_modules/undici/", "/node_modules/ws/", "/node_modules/mime/"]) {
        expect(inputs.filter((input) => input.includes(lazy))).toEqual([])
      }
    }
    for (const name of ["undici", "ws", "mime"]) {
      const output = build.outputs[`dist/vendor/${name}.cjs`]
      expect(output).toBeDefined()
      expect(Object.keys(output?.inputs ?? {}).some((input) => input.includes(`/node_modules/${name}/`))).toBe(true)
    }
  })

  it("PGlite stays outside the bundle (its WebAssembly and data files are found next to its own module)", () => {
    const build = meta()
    const inputs = Object.values(build.outputs).flatMap((output) => Object.keys(output.inputs))
    expect(inputs.filter((input) => input.includes("/node_modules/@electric-sql/pglite"))).toEqual([])
    // The serve script, which cannot import(), requires it (Node loads an ES module so too).
    expect(build.outputs["dist/serve.js"]?.imports).toContainEqual({ path: "@electric-sql/pglite", kind: "require-call", external: true })
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
    expect(bin).toContain("../dist/serve.js")
    expect(bin).not.toContain("tsx")
  })
})
