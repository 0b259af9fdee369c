import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The binary's tests run the build: never a stale one (see test/support/BuildFirst.ts).
    globalSetup: ["test/support/BuildFirst.ts"],
    // Opening an embedded PGlite compiles its WebAssembly (seconds on a small machine).
    hookTimeout: 60_000,
    testTimeout: 30_000
  }
})
