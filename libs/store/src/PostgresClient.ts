/**
 * The PostgreSQL client: a node-postgres pool behind `SqlClient` that
 * survives poolers and failovers.
 *
 * - A connection whose statement fails with 25006 (read-only: the server is
 *   now a standby), a shutdown (57P01-57P03) or a socket failure is
 *   destroyed, never handed out again; its `SqlError` says it is transient.
 * - Each new connection checks it is on a primary (one round trip, on new
 *   connections only): one on a standby is closed and the acquisition fails,
 *   so the pool never holds a standby connection.
 * - LISTEN runs on one dedicated connection that comes back by itself
 *   (`internal/pgListener.ts`), through `sessionUrl` when given (a direct
 *   connection: LISTEN cannot work through a transaction pooler). Without
 *   it, a transaction pooler in front of `url` is detected on the first
 *   subscription, and the listener polls instead: one cheap statement every
 *   `POLL_EVERY` wakes subscribers when anything was written.
 * - Refused at start, each with a sentence: a multi-host URL (the driver
 *   cannot follow it), and a URL that reaches a standby.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import * as Statement from "@effect/sql/Statement"
import { Clock, Context, Data, Duration, Effect, Layer, Mailbox, Option, Redacted, type Scope, Stream } from "effect"
import * as Pg from "pg"
import { makeConnection, reserve } from "./internal/pgConnection.js"
import { STANDBY_CHECK, StandbyConnection, sqlError, standbyOf } from "./internal/pgFailures.js"
import * as PgListener from "./internal/pgListener.js"
import { multipleHosts, throughTransactionPooler } from "./internal/pgTopology.js"
import { pgTypes } from "./internal/valueTypes.js"

export { isTransient } from "./internal/pgFailures.js"
export { MISSED } from "./internal/pgListener.js"

/** How often the listener polls when LISTEN cannot work (behind a transaction pooler). */
export const POLL_EVERY = Duration.millis(100)

/** A database the server must not start on: a sentence that says why and what to set. */
export class DatabaseRefused extends Data.TaggedError("DatabaseRefused")<{ readonly message: string }> {}

/** How to reach PostgreSQL. */
export interface PostgresOptions {
  /** The pool's connection string (may go through a transaction pooler). */
  readonly url: Redacted.Redacted
  /** Most connections of the pool. */
  readonly poolSize: number
  /** A direct connection (no transaction pooler) for what needs a session: LISTEN. */
  readonly sessionUrl?: Option.Option<Redacted.Redacted> | undefined
  /** Shown to PostgreSQL as `application_name`. Default "crm-relay". */
  readonly applicationName?: string | undefined
}

/** How the listener learns of notifications: LISTEN, or polling behind a transaction pooler. */
export type ListenMode = "listen" | "poll"

/** LISTEN (or its polling stand-in) for the Notifier. */
export class PostgresListen extends Context.Tag("@crm-relay/store/PostgresListen")<
  PostgresListen,
  PgListener.Listener & {
    /** Decided on first use: "poll" when the pool goes through a transaction pooler and no session URL is set. */
    readonly mode: Effect.Effect<ListenMode>
  }
>() {}

const refusedMultiHost = (setting: string, hosts: ReadonlyArray<string>) =>
  new DatabaseRefused({
    message: `${setting} names several hosts (${hosts.join(", ")}), which the PostgreSQL driver cannot follow: ` +
      "point it at one address that always reaches the primary, such as HAProxy in front of the cluster or the provider's single endpoint."
  })

const refusedStandby = (setting: string) =>
  new DatabaseRefused({
    message: `${setting} reaches a read-only server (a standby, pg_is_in_recovery() is true, or transaction_read_only is on): ` +
      "point it at the primary, or at the balancer's endpoint for the primary."
  })

/** The sentence `serve` logs once when LISTEN cannot work. */
export const pollingSentence = (every: Duration.Duration = POLL_EVERY): string =>
  `DATABASE_URL goes through a transaction pooler (PgBouncer?), where LISTEN cannot work: workers poll every ` +
  `${Duration.toMillis(every)} ms instead; set DATABASE_SESSION_URL to a direct connection to the primary for wake-ups in milliseconds.`

const describe = (url: Redacted.Redacted) => {
  try {
    const parsed = new URL(Redacted.value(url))
    return {
      host: parsed.hostname || "localhost",
      port: Number(parsed.port || "5432"),
      database: decodeURIComponent(parsed.pathname.slice(1)) || decodeURIComponent(parsed.username) || "postgres"
    }
  } catch {
    return { host: "localhost", port: 5432, database: "postgres" }
  }
}

const clientConfig = (url: Redacted.Redacted, applicationName: string): Pg.ClientConfig => ({
  connectionString: Redacted.value(url),
  connectionTimeoutMillis: 5_000,
  keepAlive: true,
  application_name: applicationName,
  types: pgTypes
})

const openClient = (config: Pg.ClientConfig) => async (): Promise<Pg.Client> => {
  const client = new Pg.Client(config)
  // Errors of a client in use reach its queries; one outside them must not crash the process.
  client.on("error", () => undefined)
  await client.connect()
  return client
}

const PgJson = Statement.custom<Statement.Custom<"PgJson", unknown>>("PgJson")

/**
 * The client for the scope: `SqlClient` (also as a `PgClient`, for code
 * written against @effect/sql-pg) and the listener.
 */
export const make = (
  options: PostgresOptions
): Effect.Effect<
  { readonly client: PgClient.PgClient; readonly listen: PostgresListen["Type"] },
  SqlError | DatabaseRefused,
  Scope.Scope | Reactivity.Reactivity
> =>
  Effect.gen(function*() {
    const sessionUrl = Option.flatten(Option.fromNullable(options.sessionUrl))
    for (const [setting, url] of [["DATABASE_URL", options.url], ...Option.toArray(Option.map(sessionUrl, (u) => ["DATABASE_SESSION_URL", u] as const))] as const) {
      const hosts = multipleHosts(Redacted.value(url))
      if (hosts !== undefined) return yield* Effect.fail(refusedMultiHost(setting, hosts))
    }
    const applicationName = options.applicationName ?? "crm-relay"
    const config = clientConfig(options.url, applicationName)
    const pool = new Pg.Pool({
      ...config,
      max: options.poolSize,
      idleTimeoutMillis: 30_000,
      // Before a new connection is used: on a standby it is closed and the acquisition fails (transient).
      onConnect: async (client: Pg.ClientBase) => {
        const standby = standbyOf((await client.query(STANDBY_CHECK)).rows[0])
        if (standby !== undefined) throw standby
      }
    })
    pool.on("error", () => undefined)
    // A connection the pool has handed out has no listener of the pool's until a statement attaches one: a
    // socket closed in that moment (a balancer shutting sessions down at a failover) would be an uncaught
    // 'error' that ends the process. Ignored here, it fails the next statement, which drops the connection.
    pool.on("connect", (client) => client.on("error", () => undefined))
    yield* Effect.addFinalizer(() => Effect.promise(() => pool.end().catch(() => undefined)).pipe(Effect.timeoutOption(1_000)))

    // At start, the first connection: refused on a standby, failed when unreachable.
    yield* Effect.tryPromise({
      try: async () => (await pool.connect()).release(),
      catch: (cause) => cause instanceof StandbyConnection ? refusedStandby("DATABASE_URL") : sqlError(cause, "Could not connect to PostgreSQL")
    }).pipe(
      Effect.timeoutFail({
        duration: Duration.seconds(10),
        onTimeout: () => new SqlError({ cause: new Error("Connection timed out"), message: "Could not connect to PostgreSQL in time" })
      })
    )

    const where = describe(options.url)
    const sql = yield* SqlClient.make({
      acquirer: Effect.succeed(makeConnection(pool)),
      transactionAcquirer: reserve(pool),
      compiler: PgClient.makeCompiler(),
      spanAttributes: [
        ["db.system.name", "postgresql"],
        ["db.namespace", where.database],
        ["server.address", where.host],
        ["server.port", where.port]
      ]
    })

    const scope = yield* Effect.scope
    const openMain = openClient(config)
    const listener = yield* PgListener.make(
      Option.match(sessionUrl, { onNone: () => openMain, onSome: (url) => openClient(clientConfig(url, applicationName)) })
    )
    const mode = yield* Effect.cached(
      Option.isSome(sessionUrl)
        ? Effect.succeed<ListenMode>("listen")
        : Effect.tryPromise(() => throughTransactionPooler(openMain)).pipe(
          Effect.map((pooled): ListenMode => pooled ? "poll" : "listen"),
          Effect.tap((mode) => mode === "poll" ? Effect.logWarning(pollingSentence()) : Effect.void),
          Effect.orElseSucceed((): ListenMode => "listen")
        )
    )
    const poller = yield* polling(sql, scope)
    const subscribe = (channel: string) =>
      Effect.flatMap(mode, (m) => m === "poll" ? poller.subscribe(channel) : listener.subscribe(channel))

    const notify = (channel: string, payload: string) =>
      sql`SELECT pg_notify(${channel}, ${payload})`.pipe(Effect.asVoid)
    const client: PgClient.PgClient = Object.assign(sql, {
      [PgClient.TypeId]: PgClient.TypeId,
      config: { url: options.url, maxConnections: options.poolSize, applicationName, ...where },
      json: (value: unknown) => PgJson(value),
      listen: (channel: string) =>
        Stream.unwrapScoped(subscribe(channel)).pipe(Stream.filter((payload) => payload !== PgListener.MISSED)),
      notify
    }) as PgClient.PgClient
    return { client, listen: { subscribe, mode } }
  })

/**
 * The stand-in for LISTEN behind a transaction pooler: one statement every
 * `POLL_EVERY` reads the write-ahead log's position, and when it moved
 * (something was written, a job queued) every subscriber hears `MISSED`.
 */
const polling = (sql: SqlClient.SqlClient, scope: Scope.Scope) =>
  Effect.gen(function*() {
    const subscribers = new Set<Mailbox.Mailbox<string, SqlError>>()
    let started = false
    let last: string | undefined
    const tick = sql<{ lsn: string }>`SELECT pg_current_wal_lsn()::text AS lsn`.pipe(
      Effect.tap((rows) =>
        Effect.sync(() => {
          const lsn = rows[0]?.lsn
          if (lsn !== last && last !== undefined) for (const subscriber of subscribers) subscriber.unsafeOffer(PgListener.MISSED)
          last = lsn
        })
      ),
      Effect.ignore,
      Effect.zipRight(Effect.sleep(POLL_EVERY)),
      Effect.forever,
      Effect.withClock(Clock.make())
    )
    return {
      subscribe: (_channel: string) =>
        Effect.gen(function*() {
          if (!started) {
            started = true
            yield* Effect.forkIn(tick, scope)
          }
          const mailbox = yield* Mailbox.make<string, SqlError>()
          yield* Effect.acquireRelease(Effect.sync(() => subscribers.add(mailbox)), () => Effect.sync(() => subscribers.delete(mailbox)))
          return Mailbox.toStream(mailbox)
        })
    }
  })

/** `SqlClient`, `PgClient` and `PostgresListen` for the Layer's lifetime. */
export const layer = (
  options: PostgresOptions
): Layer.Layer<SqlClient.SqlClient | PgClient.PgClient | PostgresListen, SqlError | DatabaseRefused> =>
  Layer.scopedContext(
    Effect.map(make(options), ({ client, listen }) =>
      Context.make(PgClient.PgClient, client).pipe(
        Context.add(SqlClient.SqlClient, client),
        Context.add(PostgresListen, listen)
      ))
  ).pipe(Layer.provide(Reactivity.layer))
