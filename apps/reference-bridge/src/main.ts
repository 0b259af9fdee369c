/**
 * `npm start` — runs a reference bridge for the demo: one tenant with an
 * API key (and an OAuth client when configured), records in memory (or in
 * PostgreSQL with --database-url), on loopback HTTPS. It prints its URLs, writes the CA PEM to a file (use it
 * as NODE_EXTRA_CA_CERTS), and stops cleanly on SIGINT or SIGTERM.
 */
import { Operations } from "@crm-relay/contract"
import { Certificate } from "@crm-relay/testing"
import { FileSystem, Path } from "@effect/platform"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Database } from "@crm-relay/store"
import { Effect, Layer, Option, Redacted, Schema } from "effect"
import { randomBytes } from "node:crypto"
import * as CliConfig from "./CliConfig.js"
import * as MemoryStore from "./MemoryStore.js"
import * as ReferenceBridge from "./ReferenceBridge.js"
import * as SqlStore from "./SqlStore.js"

const decodeOperations = Schema.decodeUnknown(Schema.Array(Operations.OperationName))

const program = Effect.gen(function*() {
  const config = yield* CliConfig.load(process.argv.slice(2))
  const fs = yield* FileSystem.FileSystem
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
    tls: {
      dnsNames: [...Certificate.LOOPBACK_NAMES.dnsNames, ...Option.getOrElse(config.tlsNames, () => [])],
      ips: Certificate.LOOPBACK_NAMES.ips
    },
    ...(operations === undefined ? {} : { operations }),
    ...(controlToken === undefined ? {} : { controlToken })
  }).pipe(Effect.provide(store))

  const caFile = path.resolve(config.caFile)
  yield* fs.makeDirectory(path.dirname(caFile), { recursive: true })
  yield* fs.writeFileString(caFile, bridge.ca)

  yield* Effect.logInfo("reference bridge ready").pipe(
    Effect.annotateLogs({
      tenant: config.tenantId,
      rest: bridge.restBaseUrl,
      mcp: bridge.mcpUrl,
      token: bridge.tokenUrl,
      ...(bridge.controlUrl === undefined ? {} : { control: bridge.controlUrl }),
      ca: caFile,
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
