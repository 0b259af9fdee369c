/**
 * `DATA_DIR/server.json`: how the CLI finds a running server (its pid and
 * internal API URL), so it never opens an embedded database that server
 * owns. Written once the APIs listen, removed on a clean stop; a file left
 * by a killed server names a dead pid and is ignored.
 */
import { DataDirLock } from "@crm-relay/store"
import { Effect, Option, Schema, type Scope } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"

/** What a running server publishes about itself. */
export const ServerInfo = Schema.Struct({
  pid: Schema.Int,
  adminUrl: Schema.String,
  publicUrl: Schema.optional(Schema.String),
  /** Where the Integrations area's links point (PORTAL_PUBLIC_URL, or its listener). */
  portalUrl: Schema.optional(Schema.String),
  startedAt: Schema.String
})
export type ServerInfo = typeof ServerInfo.Type

const decode = Schema.decodeUnknownOption(Schema.parseJson(ServerInfo))

/** The file's path. */
export const path = (dataDir: string): string => Path.join(dataDir, "server.json")

/** Publishes `info` for the scope. */
export const publish = (dataDir: string, info: ServerInfo): Effect.Effect<void, never, Scope.Scope> => {
  const file = path(dataDir)
  return Effect.acquireRelease(
    Effect.sync(() => {
      Fs.mkdirSync(dataDir, { recursive: true })
      const temporary = `${file}.${process.pid}`
      Fs.writeFileSync(temporary, JSON.stringify(info), { mode: 0o600 })
      Fs.renameSync(temporary, file)
    }),
    () =>
      Effect.sync(() => {
        const current = Option.flatMap(Option.liftThrowable(() => Fs.readFileSync(file, "utf8"))(), decode)
        if (Option.isSome(current) && current.value.pid === process.pid) Fs.rmSync(file, { force: true })
      })
  )
}

/** The running server of `dataDir`, if its process is alive. */
export const running = (dataDir: string): Effect.Effect<Option.Option<ServerInfo>> =>
  Effect.sync(() =>
    Option.liftThrowable(() => Fs.readFileSync(path(dataDir), "utf8"))().pipe(
      Option.flatMap(decode),
      Option.filter((info) => DataDirLock.isAlive(info.pid))
    )
  )
