import { configDefaults, defineConfig } from "vitest/config"

/**
 * PostgreSQL only, run when DATABASE_URL is set: several replicas on one database (PGlite is one process's),
 * servers through a PgBouncer in front of the real PostgreSQL, servers refused a standby or a multi-host URL,
 * and a server on a Patroni cluster of its own across a failover.
 */
const postgresOnly = [
  "test/OriginHoldReplicas.test.ts",
  "test/PgBouncerPipeline.test.ts",
  "test/PgBouncerSplitRoles.test.ts",
  "test/DatabaseRefusals.test.ts",
  "test/Failover.test.ts"
]

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    exclude: process.env["DATABASE_URL"] === undefined ? [...configDefaults.exclude, ...postgresOnly] : configDefaults.exclude,
    // The binary's tests run the build: never a stale one (see test/support/BuildFirst.ts).
    globalSetup: ["test/support/BuildFirst.ts"],
    // Timeouts are bounds against a hang, never a measure of speed: a loaded two-core machine runs a
    // test many times slower than a quiet one (an embedded PGlite compiles WebAssembly; every child
    // process starts a Node). Tests wait on conditions; one that starts processes states its own, larger bound.
    hookTimeout: 600_000,
    testTimeout: 300_000
  }
})
