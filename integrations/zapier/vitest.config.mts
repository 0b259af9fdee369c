import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.mts"],
    // Bounds against a hang, never a measure of speed: the suite starts `crm-relay serve` as a child
    // process on a loaded machine (an embedded PGlite compiles WebAssembly at start).
    hookTimeout: 600_000,
    testTimeout: 300_000,
    // Zapier's output checks raise (rather than log) when NODE_ENV starts with "test", as under `zapier test`.
    env: { NODE_ENV: "test" }
  }
})
