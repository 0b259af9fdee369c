/**
 * A PostgreSQL database of its own for one test (a `db restore` or `db move`
 * target must be an empty database, not the test schema), created on the
 * server of the test database's URL and dropped with the scope.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Redacted } from "effect"
import { randomBytes } from "node:crypto"

/** The URL of a new, empty database named `crm_relay_data_<random>` on the server of `url`. */
export const freshPostgres = (url: Redacted.Redacted) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const name = `crm_relay_data_${randomBytes(6).toString("hex")}`
    yield* Effect.acquireRelease(
      sql.unsafe(`CREATE DATABASE ${name}`),
      () => sql.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).pipe(Effect.ignore)
    )
    const parsed = new URL(Redacted.value(url))
    parsed.pathname = `/${name}`
    parsed.search = ""
    return parsed.toString()
  })
