/**
 * `crm-relay db backup | restore | move`: keep the data, bring it back, or
 * carry the embedded database onto PostgreSQL (see cli/DataOperations).
 */
import { Args, Command, Options } from "@effect/cli"
import { Effect } from "effect"
import { json, print } from "./Output.js"
import * as Progress from "./Progress.js"

// Loaded when the command runs: help and the other commands never load the backup code.
const operations = Effect.promise(() => import("./DataOperations.js"))

const file = (description: string) => Args.text({ name: "file" }).pipe(Args.withDescription(description))

const backup = Command.make(
  "backup",
  {
    file: file("Where to write the backup (one gzip'd file)."),
    force: Options.boolean("force").pipe(Options.withDescription("Replace FILE if it exists.")),
    json
  },
  ({ file, force, json }) =>
    Effect.flatMap(operations, (data) =>
      data.run((settings) =>
        Effect.flatMap(data.backup(settings, file, { force, progress: Progress.mode(json) }), (report) =>
          print(
            json,
            {
              file: report.file,
              bytes: report.bytes,
              rows: data.rowsOf(report.manifest),
              migration_level: report.manifest.migration_level,
              database: report.manifest.database,
              master_key_ids: report.manifest.master_key_ids
            },
            data.backupSentence(report)
          ))
      ))
).pipe(
  Command.withDescription(
    "Write a consistent backup of the database to FILE. It works while `serve` runs (through the running server when it " +
      "holds the embedded database) or not. It holds no master key: keep MASTER_KEY, or DATA_DIR/master-key, with it."
  )
)

const restore = Command.make(
  "restore",
  { file: file("The backup to restore."), json },
  ({ file, json }) =>
    Effect.flatMap(operations, (data) =>
      data.run((settings) =>
        Effect.flatMap(data.restore(settings, file, { progress: Progress.mode(json) }), ({ manifest, where }) =>
          print(
            json,
            { restored: where, rows: data.rowsOf(manifest), migration_level: manifest.migration_level },
            `Restored ${data.rowsOf(manifest)} rows of ${manifest.parts.length} tables into ${where}, ` +
              `each table's rows and checksum verified. Start it with crm-relay serve.`
          ))
      ))
).pipe(
  Command.withDescription(
    "Restore a backup into an empty database. That is DATA_DIR's embedded one, or the PostgreSQL database of DATABASE_URL " +
      "when set. The whole file and the master key are checked before anything is written; a failure leaves no half database."
  )
)

const move = Command.make(
  "move",
  {
    to: Options.text("to").pipe(Options.withDescription("URL of an empty PostgreSQL database (postgres://user:password@host:5432/database).")),
    json
  },
  ({ json, to }) =>
    Effect.flatMap(operations, (data) =>
      data.run((settings) =>
        Effect.flatMap(data.move(settings, to, { progress: Progress.mode(json) }), ({ manifest, masterKey, where }) =>
          print(
            json,
            { moved_to: where, rows: data.rowsOf(manifest), tables: manifest.parts.length },
            `Moved ${data.rowsOf(manifest)} rows of ${manifest.parts.length} tables to ${where}, each table's rows and ` +
              `checksum verified; the embedded database is left as it was.\nNext, on every replica set:\n` +
              `  DATABASE_URL: the --to URL\n  ${masterKey}\nthen run crm-relay serve.`
          ))
      ))
).pipe(
  Command.withDescription(
    "Copy the embedded database to an empty PostgreSQL one. Run it with `serve` stopped: every table and row of DATA_DIR " +
      "comes across, secrets still sealed, pending work kept; then it prints what to set."
  )
)

/** `crm-relay db`. */
export const command = Command.make("db").pipe(
  Command.withDescription("Back up, restore, or move the database to PostgreSQL."),
  Command.withSubcommands([backup, restore, move])
)
