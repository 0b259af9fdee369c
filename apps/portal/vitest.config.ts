import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Bounds against a hang, never a measure of speed: a browser, a server, a bridge and an embedded
    // database share a loaded two-core machine; every wait in the tests is on a condition.
    hookTimeout: 600_000,
    testTimeout: 600_000
  }
})
