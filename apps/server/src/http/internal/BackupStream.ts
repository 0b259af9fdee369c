/**
 * GET /v1/backup: a backup of the server's database streamed as the
 * snapshot is read, so `crm-relay db backup` works while `serve` holds the
 * embedded database (its data directory belongs to the server alone).
 */
import { HttpServerResponse } from "@effect/platform"
import * as NodeStream from "@effect/platform-node/NodeStream"
import * as SqlClient from "@effect/sql/SqlClient"
import type { Database } from "@crm-relay/store"
import * as Format from "@crm-relay/store/Backup/Format"
import * as Snapshot from "@crm-relay/store/Backup/Snapshot"
import { Cause, Effect, Fiber, Stream } from "effect"
import * as Zlib from "node:zlib"
import { VERSION } from "../../config/Version.js"

/** The response: the gzip stream a snapshot is being written into. */
export const response = (
  sql: SqlClient.SqlClient,
  info: typeof Database.DatabaseInfo.Service
): Effect.Effect<HttpServerResponse.HttpServerResponse> =>
  Effect.gen(function*() {
    const gzip = Zlib.createGzip()
    const fiber = yield* Snapshot.dump(Format.writer(gzip), { crmRelayVersion: VERSION, database: info.kind }).pipe(
      Effect.provideService(SqlClient.SqlClient, sql),
      Effect.tapErrorCause((cause) =>
        Effect.zipRight(
          Effect.logError("The backup stopped half-way", cause),
          // The body ends early, without a manifest: the CLI refuses the file whole.
          Effect.sync(() => gzip.destroy(new Error(Cause.pretty(cause))))
        )
      ),
      Effect.forkDaemon
    )
    const body = NodeStream.fromReadable<Error>(() => gzip, (error) => error instanceof Error ? error : new Error(String(error))).pipe(
      // The client went away: stop reading the snapshot (its temporary copies are dropped).
      Stream.ensuring(Fiber.interrupt(fiber))
    )
    return HttpServerResponse.stream(body, { contentType: "application/gzip" })
  })
