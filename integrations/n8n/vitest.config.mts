import { defineConfig } from "vitest/config"

// Run by `npm run test:n8n` (tools/n8n/test.sh) after the package is built and n8n installed;
// never by the root `npm test` (this folder is not a workspace).
export default defineConfig({
  test: {
    root: import.meta.dirname,
    include: ["test/**/*.test.mts"],
    // Bounds against a hang, never a measure of speed: the suite starts n8n (a fresh SQLite database
    // migrates for about a minute on an idle machine) and `crm-relay serve` on a loaded 2-core machine.
    hookTimeout: 900_000,
    testTimeout: 600_000
  }
})
