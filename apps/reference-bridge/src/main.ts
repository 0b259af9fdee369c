/**
 * `npm start` — runs a reference bridge for the demo: one tenant with an
 * API key (and an OAuth client when configured), records in memory (or in
 * PostgreSQL with --database-url), on loopback HTTPS. It prints its URLs, keeps its CA in a file (use it
 * as NODE_EXTRA_CA_CERTS; the same CA is reused at the next start) and stops cleanly on SIGINT or SIGTERM.
 */
import { Operations } from "@crm-relay/contract"
import { Certificate } from "@crm-relay/testing"
import { Path } from "@effect/platform"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Database } from "@crm-relay/store"
import { Effect, Layer, Option, Redacted, Schema } from "effect"
import { randomBytes } from "node:crypto"
import * as CaFiles from "./CaFiles.js"
import * as CliConfig from "./CliConfig.js"
import * as MemoryStore from "./MemoryStore.js"
import * as ReferenceBridge from "./ReferenceBridge.js"
import * as SqlStore from "./SqlStore.js"

const decodeOperations = Schema.decodeUnknown(Schema.Array(Operations.OperationName))

const program = Effect.gen(function*() {
  const config = yield* CliConfig.load(process.argv.slice(2))
  const path = yield* Path.Path

  const generated = Option.isNone(config.apiKey)
  const apiKey = Option.getOrElse(config.apiKey, () => Redacted.make(randomBytes(24).toString("base64url")))
  const oauth = Option.isSome(config.oauthClientId) && Option.isSome(config.oauthClientSecret)
    ? {
      clientId: config.oauthClientId.value,
      clientSecret: config.oauthClientSecret.value,
      ...Option.match(config.oauthScope, { onNone: () => ({}), onSome: (scope) => ({ scope }) }),
      ...Option.match(config.oauthExpiresIn, { onNone: () => ({}), onSome: (expiresIn) => ({ expiresIn }) })
    }
    : undefined
  const operations = Option.isSome(config.operations) ? yield* decodeOperations(config.operations.value) : undefined
  const controlToken = Option.getOrUndefined(config.controlToken)

  // The CA outlives this process: a server that trusts the file keeps trusting the next start.
  const base = Option.getOrElse(config.baseDir, () => process.cwd())
  const caFile = path.resolve(base, config.caFile)
  const caKeyFile = Option.match(config.caKeyFile, { onNone: () => CaFiles.keyPathOf(caFile), onSome: (file) => path.resolve(base, file) })
  const authority = yield* CaFiles.loadOrCreate({ cert: caFile, key: caKeyFile })
  if (Option.isSome(authority.replaced)) {
    yield* Effect.logWarning(`the CA files were not usable (${authority.replaced.value}); a new CA was written: trust it again`)
  }
  const server = yield* Certificate.issue(authority.ca, {
    dnsNames: [...Certificate.LOOPBACK_NAMES.dnsNames, ...Option.getOrElse(config.tlsNames, () => [])],
    ips: Certificate.LOOPBACK_NAMES.ips
  })

  // Records live in memory unless a PostgreSQL URL is given.
  const store = yield* Layer.build(
    Option.match(config.databaseUrl, {
      onNone: () => MemoryStore.layer,
      onSome: (url) => SqlStore.layer().pipe(Layer.provide(Database.layerPostgres({ url, poolSize: 5 })))
    })
  )

  const bridge = yield* ReferenceBridge.makeWith({
    tenants: [{ tenantId: config.tenantId, apiKey, ...(oauth === undefined ? {} : { oauth }) }],
    host: config.host,
    port: config.port,
    ...Option.match(config.urlHost, { onNone: () => ({}), onSome: (urlHost) => ({ urlHost }) }),
    tls: { ca: authority.ca.cert, ...server },
    ...(operations === undefined ? {} : { operations }),
    ...(controlToken === undefined ? {} : { controlToken })
  }).pipe(Effect.provide(store))

  yield* Effect.logInfo("reference bridge ready").pipe(
    Effect.annotateLogs({
      tenant: config.tenantId,
      rest: bridge.restBaseUrl,
      mcp: bridge.mcpUrl,
      token: bridge.tokenUrl,
      ...(bridge.controlUrl === undefined ? {} : { control: bridge.controlUrl }),
      ca: caFile,
      caReused: authority.reused,
      oauthClient: oauth?.clientId ?? "none",
      store: Option.isSome(config.databaseUrl) ? "postgres" : "memory"
    })
  )
  if (generated) {
    // A development convenience, shown once: pass --api-key to choose the key instead.
    yield* Effect.logWarning("generated API key (shown once)").pipe(Effect.annotateLogs({ apiKey: Redacted.value(apiKey) }))
  }
  return yield* Effect.never
}).pipe(
  Effect.scoped,
  Effect.catchTag("UsageError", (e) => Effect.zipRight(Effect.logError(`${e.message}\n${CliConfig.usage()}`), Effect.fail(e)))
)

NodeRuntime.runMain(program.pipe(Effect.provide(NodeContext.layer)))
