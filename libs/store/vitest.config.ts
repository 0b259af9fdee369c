import { configDefaults, defineConfig } from "vitest/config"

/** Tests of the PostgreSQL client on real servers (a standby, PgBouncer): run when DATABASE_URL is set. */
const postgresOnly = ["test/PostgresClient.test.ts"]

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    exclude: process.env["DATABASE_URL"] === undefined ? [...configDefaults.exclude, ...postgresOnly] : configDefaults.exclude,
    // Timeouts are bounds against a hang, never a measure of speed: a loaded two-core machine runs a
    // test many times slower than a quiet one (an embedded PGlite compiles WebAssembly; a child process
    // starts tsx). Tests wait on conditions; one that starts processes states its own, larger bound.
    hookTimeout: 600_000,
    testTimeout: 300_000
  }
})
