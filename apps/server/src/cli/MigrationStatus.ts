/**
 * `crm-relay migrate --status`: the applied, pending and unknown migrations,
 * read without migrating. It is the one command that opens a database a
 * newer release migrated (unguarded, reading only): it says what is there.
 */
import { Migrations } from "@crm-relay/store"
import * as SqlClient from "@effect/sql/SqlClient"
import { Context, Effect, Layer } from "effect"
import { type AdminError, databaseFailure } from "./AdminError.js"
import * as DataAccess from "./DataAccess.js"
import type { CliSettings } from "../config/Settings.js"

/** Reads the migration status, directly or through the running server. */
export class MigrationStatus extends Context.Tag("@crm-relay/server/MigrationStatus")<
  MigrationStatus,
  { readonly status: Effect.Effect<Migrations.Status, AdminError> }
>() {}

/** Directly on the database: one read, no migration. */
export const layerDirect: Layer.Layer<MigrationStatus, never, SqlClient.SqlClient> = Layer.effect(
  MigrationStatus,
  Effect.map(SqlClient.SqlClient, (sql) => ({
    status: Migrations.status().pipe(Effect.provideService(SqlClient.SqlClient, sql), Effect.mapError(databaseFailure))
  }))
)

/** Through the running server's internal API. */
export const layerRemote = DataAccess.layerRemote(MigrationStatus, ({ client, explain }) => ({
  status: client.operations.migrationStatus().pipe(Effect.mapError(explain))
}))

/** Runs `f` with the status operation for this environment, without the newer-release guard. */
export const withStatus = DataAccess.withOperations(
  MigrationStatus,
  (settings: CliSettings) => DataAccess.layerFromSettings(settings, { direct: layerDirect, remote: layerRemote, guard: false })
)

/** The status as lines for a person. */
export const render = (status: Migrations.Status): string => {
  const lines: Array<string> = []
  lines.push(`Applied (${status.applied.length}):`)
  for (const row of status.applied) lines.push(`  ${Migrations.label(row.id, row.name)}  applied ${row.applied_at}`)
  lines.push(`Pending (${status.pending.length}):${status.pending.length === 0 ? " none" : ""}`)
  for (const row of status.pending) lines.push(`  ${Migrations.label(row.id, row.name)}`)
  lines.push(`Unknown to this build (${status.unknown.length}):${status.unknown.length === 0 ? " none" : ""}`)
  for (const row of status.unknown) lines.push(`  ${Migrations.label(row.id, row.name)}  applied ${row.applied_at}  (written by a newer release)`)
  if (status.unknown.length > 0) {
    lines.push("This build refuses this database: run the newer release, or restore a backup made by this one.")
  } else if (status.pending.length > 0) {
    lines.push("`crm-relay migrate` (or `crm-relay serve`) applies the pending migrations.")
  }
  return lines.join("\n")
}
