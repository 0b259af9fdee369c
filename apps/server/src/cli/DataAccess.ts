/**
 * How a CLI command reaches the data. Every operations tag of the CLI
 * (accounts and keys, push jobs, deliveries, connections) has a direct Layer
 * over the database and a remote one through the running server's internal
 * API; `layerFromSettings` picks: PostgreSQL → directly (many processes may
 * share it); embedded PGlite → through the running server when there is one
 * (the data directory belongs to it), otherwise directly, holding the
 * directory's lock for the duration of the command.
 */
import { FetchHttpClient, HttpApiClient, HttpClient, HttpClientRequest } from "@effect/platform"
import { Database, DataDirLock, Migrations } from "@crm-relay/store"
import * as Audit from "@crm-relay/store/Audit"
import { ErrorResponses } from "@crm-relay/events"
import { type Context, Duration, Effect, Layer, Option, ParseResult, Redacted, Schedule } from "effect"
import { AdminError, databaseFailure, refused } from "./AdminError.js"
import * as AdminToken from "../config/AdminToken.js"
import { InternalApi } from "@crm-relay/contract/InternalApi"
import * as Logging from "../observability/Logging.js"
import * as ServerFile from "../config/ServerFile.js"
import * as Settings from "../config/Settings.js"

const makeClient = (baseUrl: string, token: Redacted.Redacted<string>) =>
  HttpApiClient.make(InternalApi, {
    baseUrl,
    transformClient: HttpClient.mapRequest(HttpClientRequest.bearerToken(Redacted.value(token)))
  })

/** What a remote Layer works with: the running server's internal API and the failures every operation shares. */
export interface Remote {
  readonly baseUrl: string
  readonly client: Effect.Effect.Success<ReturnType<typeof makeClient>>
  /** The AdminError for a failure the operation does not explain itself: the token refused, or no proper answer. */
  readonly failed: (error: { readonly _tag: string }) => AdminError
  /**
   * The AdminError for any failure of a call: the API's own sentence when it
   * answered with the Error object (a refusal of the request exits 2), else as `failed`.
   */
  readonly explain: (error: { readonly _tag: string }) => AdminError
}

/** Errors of the internal API that refuse the request itself (400, 404, 409): the operator's to fix. */
const REFUSALS: ReadonlySet<string> = new Set([
  "BadRequest",
  "NotFound",
  "InvalidSettings",
  "ConnectionNotAllowed",
  "PushSucceeded",
  "RotationRefused",
  "OutcomeConflict",
  "SubscriptionDisabled"
])

/** The sentence of an Error-object answer, if `error` is one. */
const sentenceOf = (error: object): string | undefined =>
  "error" in error && typeof error.error === "string" ? error.error : undefined

/** The operations of `tag` through the internal API of the server at `baseUrl`, as `make` builds them. */
export const layerRemote = <I, S>(tag: Context.Tag<I, S>, make: (remote: Remote) => S) =>
(
  baseUrl: string,
  token: Redacted.Redacted<string>
): Layer.Layer<I, never, HttpClient.HttpClient> =>
  Layer.effect(
    tag,
    Effect.map(makeClient(baseUrl, token), (client) => {
      const failed = (error: { readonly _tag: string }) =>
        new AdminError({
          message: error._tag === "Unauthorized"
            ? "The running server refused the admin token (set ADMIN_TOKEN, or keep DATA_DIR/admin-token)."
            : `The running server at ${baseUrl} did not answer properly.`
        })
      const explain = (error: { readonly _tag: string }) => {
        // The client encodes the request with the API's Schemas before sending it: the value was refused.
        if (error instanceof ParseResult.ParseError) return refused(ErrorResponses.decodeFailureSentence(error))
        const sentence = sentenceOf(error)
        if (error._tag === "Unauthorized" || sentence === undefined) return failed(error)
        return REFUSALS.has(error._tag) ? refused(sentence) : new AdminError({ message: sentence })
      }
      return make({ baseUrl, client, failed, explain })
    })
  )

/** While a server is starting it holds the directory before publishing its address: wait that long. */
const startupWait = Schedule.spaced(Duration.millis(250)).pipe(Schedule.upTo(Duration.seconds(15)))

/** Building the direct operations failed: the operator's sentence. */
const directFailure = (error: unknown): AdminError =>
  error instanceof AdminError
    ? error
    : error instanceof Migrations.UnknownMigrations
    ? refused(error.message)
    : error instanceof DataDirLock.DataDirInUse
    ? new AdminError({ message: error.message })
    : databaseFailure(error)

/**
 * The operations `I` for this environment: `direct` over the database, or
 * `remote(url, token)` through the running server. The database is refused
 * when a newer release migrated it, unless `guard` is false (`migrate --status` reports it instead).
 */
export const layerFromSettings = <I>(
  settings: Settings.CliSettings,
  build: {
    readonly direct: Layer.Layer<I, unknown, Database.Services>
    readonly remote: (baseUrl: string, token: Redacted.Redacted<string>) => Layer.Layer<I, never, HttpClient.HttpClient>
    readonly guard?: boolean
  }
): Layer.Layer<I, AdminError> => {
  const guarded = <E, R>(database: Layer.Layer<Database.Services, E, R>) =>
    build.guard === false ? database : Migrations.guard(database)
  return Option.match(settings.databaseUrl, {
    onSome: (url) =>
      build.direct.pipe(
        Layer.provide(guarded(Database.layerPostgres({ url, poolSize: Math.min(settings.databasePoolSize, 4) }))),
        Layer.catchAll((error) => Layer.fail(directFailure(error)))
      ),
    onNone: () =>
      Layer.unwrapEffect(
        Effect.gen(function*() {
          const running = yield* ServerFile.running(settings.dataDir)
          if (Option.isSome(running)) {
            const token = Option.isSome(settings.adminToken) ? settings.adminToken : yield* AdminToken.read(settings.dataDir)
            if (Option.isNone(token)) {
              return yield* new AdminError({
                message: `A server is running (pid ${running.value.pid}) but neither ADMIN_TOKEN nor ${
                  AdminToken.tokenFile(settings.dataDir)
                } gives its admin token.`
              })
            }
            return build.remote(running.value.adminUrl, token.value).pipe(Layer.provide(FetchHttpClient.layer))
          }
          // No server: open the directory ourselves (its lock keeps a server from starting meanwhile).
          const held = yield* DataDirLock.holder(Database.pgliteDirectory(settings.dataDir))
          if (Option.isSome(held)) return yield* Effect.fail("busy" as const)
          return build.direct.pipe(
            Layer.provide(guarded(Database.layerPglite({ dataDir: settings.dataDir }))),
            Layer.catchAll((error) => Layer.fail(directFailure(error)))
          )
        }).pipe(
          Effect.retry({ while: (error) => error === "busy", schedule: startupWait }),
          Effect.mapError((error) =>
            error === "busy"
              ? new AdminError({
                message: `The embedded database in ${settings.dataDir} is in use by another process that publishes no server address.`
              })
              : error
          )
        )
      )
  })
}

/**
 * Runs `f` with the operations of `tag` for this environment (CliSettings;
 * `layer` chooses how they reach the data), logging to stderr so stdout
 * carries only the command's output.
 */
export const withOperations = <I, S>(tag: Context.Tag<I, S>, layer: (settings: Settings.CliSettings) => Layer.Layer<I, AdminError>) =>
<A, E>(f: (operations: S) => Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const settings = yield* Settings.CliSettings
    // Changes made directly on the database are audited as the CLI's (through a server, as its admin token's).
    return yield* Effect.flatMap(tag, f).pipe(
      Audit.actingAs({ actor: "cli", accountId: undefined }),
      Effect.provide(layer(settings)),
      Effect.provide(Logging.layer(settings.logLevel, "stderr"))
    )
  })
