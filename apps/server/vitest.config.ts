import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Opening an embedded PGlite compiles its WebAssembly (seconds on a small machine).
    hookTimeout: 60_000,
    testTimeout: 30_000
  }
})
