import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Timeouts are bounds against a hang, never a measure of speed: a loaded two-core machine runs a
    // test many times slower than a quiet one (an embedded PGlite compiles WebAssembly; a child process
    // starts tsx). Tests wait on conditions; one that starts processes states its own, larger bound.
    hookTimeout: 600_000,
    testTimeout: 300_000
  }
})
