import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Each file starts real servers as child processes on fixed or free ports: one file at a time.
    fileParallelism: false
  }
})
