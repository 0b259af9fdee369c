/**
 * Every setting of crm-relay, read through Effect `Config` from the
 * environment — the one place that lists them. `table` (name, default,
 * meaning) is what docs/configuration.md's table is generated from or
 * checked against. Secrets are `Redacted` from the moment they are read.
 */
import * as AddressPolicy from "@crm-relay/bridge/AddressPolicy"
import { Config, ConfigError, Duration, Either, LogLevel, Option, Redacted } from "effect"

/** A documented setting. */
export interface Setting {
  readonly name: string
  /** The default as an operator reads it ("unset" when there is none). */
  readonly default: string
  readonly description: string
  readonly secret: boolean
}

/** Every setting, in the order docs/configuration.md lists them. */
export const table: ReadonlyArray<Setting> = [
  { name: "PORT", default: "8080", description: "Port of the public Event API.", secret: false },
  { name: "ADMIN_PORT", default: "8081", description: "Port of the internal API.", secret: false },
  {
    name: "ADMIN_HOST",
    default: "127.0.0.1",
    description: "Interface the internal API binds to; keep it private. Beyond loopback (0.0.0.0 in the container image), serve refuses to start without ADMIN_TOKEN.",
    secret: false
  },
  {
    name: "PORTAL_PORT",
    default: "8082",
    description: "Port of the Integrations area (the account's own web page, entered through single-use links).",
    secret: false
  },
  {
    name: "PORTAL_HOST",
    default: "127.0.0.1",
    description: "Interface the Integrations area binds to; put it behind your HTTPS proxy to open it to customers.",
    secret: false
  },
  {
    name: "PORTAL_PUBLIC_URL",
    default: "unset (http://PORTAL_HOST:PORTAL_PORT)",
    description: "Base URL customers open the Integrations area at (links are minted under it); https:// makes the session cookie Secure.",
    secret: false
  },
  {
    name: "ADMIN_TOKEN",
    default: "generated into DATA_DIR/admin-token and printed once",
    description: "Bearer token of the internal API (and of the CLI talking to a running server).",
    secret: true
  },
  {
    name: "DATABASE_URL",
    default: "unset (embedded PGlite in DATA_DIR)",
    description: "PostgreSQL connection string; unset runs an embedded PostgreSQL (PGlite).",
    secret: true
  },
  {
    name: "DATABASE_SESSION_URL",
    default: "unset (DATABASE_URL)",
    description:
      "A direct PostgreSQL connection to the primary (not through a transaction pooler such as PgBouncer) for what needs a session: " +
      "LISTEN for wake-ups. Set it when DATABASE_URL goes through a transaction pooler.",
    secret: true
  },
  {
    name: "DATABASE_POOL_SIZE",
    default: "10",
    description: "Maximum PostgreSQL connections per replica (ignored by PGlite, which is one session).",
    secret: false
  },
  {
    name: "DATA_DIR",
    default: "./.data",
    description: "Directory of the embedded database, the generated admin token and other local state.",
    secret: false
  },
  {
    name: "MASTER_KEY",
    default: "development: generated into DATA_DIR, with a warning",
    description: "32-byte base64 key encrypting bridge credentials at rest.",
    secret: true
  },
  {
    name: "MASTER_KEY_PREVIOUS",
    default: "unset",
    description: "While MASTER_KEY changes: the old key(s), comma-separated, so data keys wrapped under them still open (see master-key rotate).",
    secret: true
  },
  {
    name: "DELIVERY_MAX_PER_ORIGIN",
    default: "32 (a quarter of the 128 delivery slots)",
    description: "Most webhook deliveries to one receiver origin (scheme, host, port) a replica runs at once, so a silent or slow receiver only slows its own deliveries; 1 to 128.",
    secret: false
  },
  {
    name: "CRM_PUSH_MAX_PER_BRIDGE",
    default: "2 (a quarter of the 10 push slots)",
    description: "Most CRM push jobs to one account's bridge (account and tenant) a replica runs at once, so a bridge that times out only holds back its own tenant; 1 to 10.",
    secret: false
  },
  { name: "ROLE", default: "all", description: "What this replica runs: all, api (HTTP only) or worker (workers only).", secret: false },
  { name: "LOG_LEVEL", default: "Info", description: "Minimum log level: All, Trace, Debug, Info, Warning, Error, Fatal or None.", secret: false },
  {
    name: "EGRESS_ALLOW_PRIVATE",
    default: "unset",
    description: "CIDR list outbound calls may reach despite being private (development and tests only; logged as a warning).",
    secret: false
  },
  {
    name: "OTEL_EXPORTER_OTLP_ENDPOINT",
    default: "unset (no trace export)",
    description: "Base URL of an OpenTelemetry collector (OTLP/HTTP); when set, traces are exported to <url>/v1/traces.",
    secret: false
  },
  {
    name: "OTEL_TRACES_SAMPLER_ARG",
    default: "0.1",
    description: "Share of new traces recorded and exported, 0 to 1, when OTEL_EXPORTER_OTLP_ENDPOINT is set (without an endpoint none is recorded: nothing would read it); a trace continued from a caller or a job keeps its decision; unrecorded spans cost next to nothing.",
    secret: false
  },
  { name: "OTEL_SERVICE_NAME", default: "crm-relay", description: "service.name of the exported traces.", secret: false },
  {
    name: "PUBLIC_HEAD_TIMEOUT_MS",
    default: "10000",
    description: "Public port and Integrations area: a connection (or a keep-alive request) must deliver a complete request head within this many milliseconds, or it is closed (400 with the Error object once bytes arrived).",
    secret: false
  },
  {
    name: "PUBLIC_REQUEST_TIMEOUT_MS",
    default: "30000",
    description: "Public port and Integrations area: head and body of one request must arrive within this many milliseconds (at least PUBLIC_HEAD_TIMEOUT_MS), or it is answered 400 and the connection closed.",
    secret: false
  },
  {
    name: "PUBLIC_KEEP_ALIVE_TIMEOUT_MS",
    default: "5000",
    description: "Public port and Integrations area: an idle keep-alive connection is closed after this many milliseconds.",
    secret: false
  },
  {
    name: "PUBLIC_MAX_CONNECTIONS",
    default: "open-file limit - PUBLIC_CONNECTION_RESERVE - PORTAL_MAX_CONNECTIONS",
    description: "Public port: most connections open at once; more are closed at once and counted. At most the open-file limit minus the reserve and the Integrations area's budget (all logged at start).",
    secret: false
  },
  {
    name: "PORTAL_MAX_CONNECTIONS",
    default: "256",
    description: "Integrations area: most connections open at once; more are closed at once and counted. Taken from the open-file limit before the public port's budget; the public port's deadlines apply to it too.",
    secret: false
  },
  {
    name: "PUBLIC_CONNECTION_RESERVE",
    default: "256",
    description: "Open files the public port never takes: kept for the database pool, the internal port, bridge and webhook connections.",
    secret: false
  },
  {
    name: "FAILED_KEY_LIMIT",
    default: "30",
    description: "Requests with an invalid, disabled or missing integration key allowed per client address per minute; then its requests whose key is not valid get 429 with Retry-After, without a database query, while valid keys from it are served. Keys told invalid without the database (forged, malformed, known revoked) are counted by each replica; keys issued before keys carried a tag, across replicas.",
    secret: false
  },
  {
    name: "FAILED_KEY_HOLD_MS",
    default: "5000",
    description: "Public port: how long the 429 of an address over FAILED_KEY_LIMIT is held, its connection unread meanwhile (a tarpit: a flood gets one request per connection per hold); 0 answers at once. A valid key's request is never held.",
    secret: false
  },
  {
    name: "MAX_SUBSCRIPTIONS_PER_ACCOUNT",
    default: "100",
    description: "Most active subscriptions (REST hooks) an account may have, disabled ones included, counted in the database across replicas; past it POST /subscribe and the Integrations area answer 400 saying so. Lowering it removes nothing: existing hooks keep receiving, only new ones are refused.",
    secret: false
  },
  {
    name: "TRUSTED_PROXIES",
    default: "unset",
    description: "CIDR list of proxies whose X-Forwarded-For names the client address on the public port; from any other peer the header is ignored.",
    secret: false
  },
  {
    name: "RETENTION_PERIOD",
    default: "30 days",
    description: "How long finished rows are kept: delivered, failed and ended deliveries with their attempts, finished CRM push jobs with their receipts. Older ones are pruned in small batches by the worker.",
    secret: false
  },
  {
    name: "RETENTION_PAYLOAD_PERIOD",
    default: "RETENTION_PERIOD",
    description: "How long a finished delivery keeps its payload (at most RETENTION_PERIOD): set it shorter to drop event contents sooner than the rows, for privacy. A delivery without its payload cannot be replayed.",
    secret: false
  },
  {
    name: "RETENTION_BATCH_SIZE",
    default: "500",
    description: "Rows deleted per statement while pruning (1 to 10000); small batches keep claim latency flat.",
    secret: false
  },
  {
    name: "WEBHOOK_DISABLE_AFTER",
    default: "5 days",
    description: "A subscription whose every attempt has failed this long is disabled (not deleted); the clock starts once WEBHOOK_DISABLE_MIN_FAILURES deliveries failed within a day.",
    secret: false
  },
  {
    name: "RECEIVER_PROBE_MAX_INTERVAL",
    default: "5 seconds",
    description: "While a receiver origin (or broker host) fails, it is held and probed with one real delivery at this interval at most (from 3 s; a Retry-After on a 429 or 503 sets it, up to 5 minutes): what everything held waits at most after the receiver returns (1 s to 1 hour; longer is quieter toward a long outage).",
    secret: false
  },
  {
    name: "WEBHOOK_DISABLE_MIN_FAILURES",
    default: "3",
    description: "Failed deliveries within one day that start a subscription's auto-disable clock (1 to 1000).",
    secret: false
  },
  {
    name: "HEAP_SEMI_SPACE_MIB",
    default: "8 (ROLE worker: 2)",
    description: "Largest V8 young-generation semi-space in MiB (the young generation holds two). Under steady load V8 would grow it to 64 and keep it; smaller keeps RSS down for more CPU. A worker-only replica defaults to 2: no request bursts to absorb. 0 leaves it to V8; --max-semi-space-size in NODE_OPTIONS wins.",
    secret: false
  },
  {
    name: "HEAP_GROWTH_PERCENT",
    default: "100 (ROLE worker: 50)",
    description: "How far the V8 old generation grows past what survived its last full collection before it collects again, in percent (as Go's GOGC); V8 alone allows up to 300. Lower keeps RSS down for more collections. A worker-only replica defaults to 50. 0 leaves it to V8; --heap-growing-percent on node's command line wins.",
    secret: false
  },
  {
    name: "NODE_EXTRA_CA_CERTS",
    default: "unset",
    description: "Node's own variable: extra CA certificates to trust (how tests trust a loopback bridge).",
    secret: false
  }
]

const describe = (name: string) => table.find((s) => s.name === name)?.description ?? name

/** A redacted setting where an empty value counts as unset. */
const optionalSecret = (name: string) =>
  Config.option(Config.redacted(name)).pipe(
    Config.map(Option.filter((value) => Redacted.value(value).trim() !== "")),
    Config.withDescription(describe(name))
  )

/** What this replica runs. */
export type Role = "all" | "api" | "worker"

/** A TCP port; 0 asks the system for a free one (tests, several local servers). */
const listenPort = (name: string) =>
  Config.integer(name).pipe(
    Config.validate({ message: `${name} must be a port from 0 to 65535`, validation: (n) => n >= 0 && n <= 65535 })
  )

/** The public Event API's port. */
export const port = listenPort("PORT").pipe(Config.withDefault(8080), Config.withDescription(describe("PORT")))
/** The internal API's port. */
export const adminPort = listenPort("ADMIN_PORT").pipe(Config.withDefault(8081), Config.withDescription(describe("ADMIN_PORT")))
/** The internal API's interface. */
export const adminHost = Config.string("ADMIN_HOST").pipe(
  Config.withDefault("127.0.0.1"),
  Config.withDescription(describe("ADMIN_HOST"))
)
/** The Integrations area's port. */
export const portalPort = listenPort("PORTAL_PORT").pipe(Config.withDefault(8082), Config.withDescription(describe("PORTAL_PORT")))
/** The Integrations area's interface. */
export const portalHost = Config.string("PORTAL_HOST").pipe(
  Config.withDefault("127.0.0.1"),
  Config.withDescription(describe("PORTAL_HOST"))
)
/** The Integrations area's public base URL, when configured (empty counts as unset). */
export const portalPublicUrl = Config.option(Config.string("PORTAL_PUBLIC_URL")).pipe(
  Config.map(Option.map((url) => url.trim().replace(/\/+$/, ""))),
  Config.map(Option.filter((url) => url !== "")),
  Config.validate({
    message: "PORTAL_PUBLIC_URL must be an http:// or https:// URL",
    validation: Option.match({ onNone: () => true, onSome: (url) => /^https?:\/\/[^/?#]+(\/[^?#]*)?$/.test(url) })
  }),
  Config.withDescription(describe("PORTAL_PUBLIC_URL"))
)
/** Where the Integrations area is reached. */
export const PortalSettings = Config.all({ port: portalPort, host: portalHost, publicUrl: portalPublicUrl })
export type PortalSettings = Config.Config.Success<typeof PortalSettings>

/** The internal API's bearer token, when configured. */
export const adminToken = optionalSecret("ADMIN_TOKEN")
/** The PostgreSQL URL, when configured. */
export const databaseUrl = optionalSecret("DATABASE_URL")
/** The direct PostgreSQL URL for LISTEN, when configured. */
export const databaseSessionUrl = optionalSecret("DATABASE_SESSION_URL")
/** The PostgreSQL pool size. */
export const databasePoolSize = Config.integer("DATABASE_POOL_SIZE").pipe(
  Config.validate({ message: "DATABASE_POOL_SIZE must be from 1 to 1000", validation: (n) => n >= 1 && n <= 1000 }),
  Config.withDefault(10),
  Config.withDescription(describe("DATABASE_POOL_SIZE"))
)
/** Local state directory. */
export const dataDir = Config.string("DATA_DIR").pipe(Config.withDefault("./.data"), Config.withDescription(describe("DATA_DIR")))
/** Credentials-at-rest key (used by the call pipeline). */
export const masterKey = optionalSecret("MASTER_KEY")
/** Previous master keys, while the master key changes. */
export const masterKeyPrevious = optionalSecret("MASTER_KEY_PREVIOUS")
/** This replica's role. */
export const role = Config.literal("all", "api", "worker")("ROLE").pipe(
  Config.withDefault<Role>("all"),
  Config.withDescription(describe("ROLE"))
)
const logLevels: Readonly<Record<string, LogLevel.LogLevel>> = {
  all: LogLevel.All,
  trace: LogLevel.Trace,
  debug: LogLevel.Debug,
  info: LogLevel.Info,
  warning: LogLevel.Warning,
  warn: LogLevel.Warning,
  error: LogLevel.Error,
  fatal: LogLevel.Fatal,
  none: LogLevel.None,
  off: LogLevel.None
}

/** Minimum log level (Effect's names or labels, any case). */
export const logLevel = Config.string("LOG_LEVEL").pipe(
  Config.mapOrFail((text) => {
    const level = logLevels[text.trim().toLowerCase()]
    return level === undefined
      ? Either.left(ConfigError.InvalidData([], `LOG_LEVEL must be one of All, Trace, Debug, Info, Warning, Error, Fatal, None; got "${text}"`))
      : Either.right(level)
  }),
  Config.withDefault(LogLevel.Info),
  Config.withDescription(describe("LOG_LEVEL"))
)
/** Private ranges egress may reach (read by `@crm-relay/bridge`'s egress Layer). */
export const egressAllowPrivate = Config.option(Config.string("EGRESS_ALLOW_PRIVATE")).pipe(
  Config.withDescription(describe("EGRESS_ALLOW_PRIVATE"))
)
/** The OTLP/HTTP collector traces are exported to, when configured (empty counts as unset). */
export const otlpEndpoint = Config.option(Config.string("OTEL_EXPORTER_OTLP_ENDPOINT")).pipe(
  Config.map(Option.filter((url) => url.trim() !== "")),
  Config.withDescription(describe("OTEL_EXPORTER_OTLP_ENDPOINT"))
)
/** Share of new traces recorded (TraceSampling), and so exported. */
export const sampleRatio = Config.number("OTEL_TRACES_SAMPLER_ARG").pipe(
  Config.validate({ message: "OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1", validation: (n) => n >= 0 && n <= 1 }),
  Config.withDefault(0.1),
  Config.withDescription(describe("OTEL_TRACES_SAMPLER_ARG"))
)
/** The exported service name. */
export const serviceName = Config.string("OTEL_SERVICE_NAME").pipe(
  Config.withDefault("crm-relay"),
  Config.withDescription(describe("OTEL_SERVICE_NAME"))
)
/** What trace export needs. */
export const TracingSettings = Config.all({ otlpEndpoint, sampleRatio, serviceName })
export type TracingSettings = Config.Config.Success<typeof TracingSettings>

/** A whole number from `least` to `most` (`unit` names it in the message). */
const wholeNumberIn = (name: string, least: number, most: number, unit: string) =>
  Config.integer(name).pipe(
    Config.validate({
      message: `${name} must be a whole number${unit} from ${least} to ${most}`,
      validation: (n) => n >= least && n <= most
    })
  )

/** A whole number from `least` to `most` (`unit` names it in the message), with a default. */
const wholeNumber = (name: string, fallback: number, least: number, most: number, unit = "") =>
  wholeNumberIn(name, least, most, unit).pipe(Config.withDefault(fallback), Config.withDescription(describe(name)))

/** A whole number from `least` to `most` (`unit` names it in the message), if set. */
const optionalWholeNumber = (name: string, least: number, most: number, unit = "") =>
  Config.option(wholeNumberIn(name, least, most, unit)).pipe(Config.withDescription(describe(name)))

/** A whole number of milliseconds from `least` (1 unless given) to `max`, with a default. */
const millis = (name: string, fallback: number, max = 3_600_000, least = 1) => wholeNumber(name, fallback, least, max, " of milliseconds")

/** The public port's connection rules (the budget's default is derived from the open-file limit at start). */
export const PublicEdgeSettings = Config.all({
  headTimeoutMs: millis("PUBLIC_HEAD_TIMEOUT_MS", 10_000),
  requestTimeoutMs: millis("PUBLIC_REQUEST_TIMEOUT_MS", 30_000),
  keepAliveTimeoutMs: millis("PUBLIC_KEEP_ALIVE_TIMEOUT_MS", 5_000),
  maxConnections: Config.option(Config.integer("PUBLIC_MAX_CONNECTIONS").pipe(
    Config.validate({ message: "PUBLIC_MAX_CONNECTIONS must be a whole number of at least 1", validation: (n) => n >= 1 })
  )).pipe(Config.withDescription(describe("PUBLIC_MAX_CONNECTIONS"))),
  portalMaxConnections: wholeNumber("PORTAL_MAX_CONNECTIONS", 256, 1, 1_000_000),
  connectionReserve: wholeNumber("PUBLIC_CONNECTION_RESERVE", 256, 0, 1_000_000),
  failedKeyLimit: wholeNumber("FAILED_KEY_LIMIT", 30, 1, 1_000_000),
  failedKeyHoldMs: millis("FAILED_KEY_HOLD_MS", 5_000, 60_000, 0),
  trustedProxies: Config.string("TRUSTED_PROXIES").pipe(
    Config.mapOrFail((text) =>
      Either.mapLeft(
        AddressPolicy.parseCidrList(text),
        (reason) => ConfigError.InvalidData([], `TRUSTED_PROXIES must be a comma-separated CIDR list (e.g. 10.0.0.0/8,::1/128): ${reason}`)
      )
    ),
    Config.withDefault<ReadonlyArray<AddressPolicy.Cidr>>([]),
    Config.withDescription(describe("TRUSTED_PROXIES"))
  )
}).pipe(
  Config.validate({
    message: "PUBLIC_REQUEST_TIMEOUT_MS must be at least PUBLIC_HEAD_TIMEOUT_MS (the request's deadline includes its head)",
    validation: (edge) => edge.requestTimeoutMs >= edge.headTimeoutMs
  })
)
export type PublicEdgeSettings = Config.Config.Success<typeof PublicEdgeSettings>

/** A positive duration such as "30 days" or "12 hours"; zero, negative or unreadable is refused with `name` and an example. */
const positiveDuration = (name: string, example: string) =>
  Config.string(name).pipe(
    Config.mapOrFail((text) => {
      const parsed = Duration.decodeUnknown(text.trim())
      return Option.isSome(parsed) && Duration.isFinite(parsed.value) && Duration.toMillis(parsed.value) > 0
        ? Either.right(parsed.value)
        : Either.left(ConfigError.InvalidData([], `${name} must be a positive duration such as "${example}"; got "${text}"`))
    })
  )

/** How long finished rows are kept. */
export const retentionPeriod = positiveDuration("RETENTION_PERIOD", "30 days").pipe(
  Config.withDefault(Duration.days(30)),
  Config.withDescription(describe("RETENTION_PERIOD"))
)
/** How long finished deliveries keep their payload (none: as long as the rows). */
export const retentionPayloadPeriod = Config.option(positiveDuration("RETENTION_PAYLOAD_PERIOD", "7 days")).pipe(
  Config.withDescription(describe("RETENTION_PAYLOAD_PERIOD"))
)
/** Rows per pruning statement. */
export const retentionBatchSize = wholeNumber("RETENTION_BATCH_SIZE", 500, 1, 10_000)
/** How long every attempt must fail before a subscription is disabled. */
export const webhookDisableAfter = positiveDuration("WEBHOOK_DISABLE_AFTER", "5 days").pipe(
  Config.withDefault(Duration.days(5)),
  Config.withDescription(describe("WEBHOOK_DISABLE_AFTER"))
)
/** The longest interval between probes of a failing receiver origin. */
export const receiverProbeMaxInterval = positiveDuration("RECEIVER_PROBE_MAX_INTERVAL", "5 seconds").pipe(
  Config.validate({
    message: "RECEIVER_PROBE_MAX_INTERVAL must be from 1 second to 1 hour",
    validation: (d) => Duration.toMillis(d) >= 1_000 && Duration.toMillis(d) <= 3_600_000
  }),
  Config.withDefault(Duration.seconds(5)),
  Config.withDescription(describe("RECEIVER_PROBE_MAX_INTERVAL"))
)
/** Failed deliveries within a day that start the auto-disable clock. */
export const webhookDisableMinFailures = wholeNumber("WEBHOOK_DISABLE_MIN_FAILURES", 3, 1, 1000)

/** What the receiver lifecycle needs: retention and auto-disable. */
export const LifecycleSettings = Config.all({
  retentionPeriod,
  retentionPayloadPeriod,
  retentionBatchSize,
  webhookDisableAfter,
  webhookDisableMinFailures,
  receiverProbeMaxInterval
}).pipe(
  Config.validate({
    message: "RETENTION_PAYLOAD_PERIOD cannot be longer than RETENTION_PERIOD (payloads go with their rows)",
    validation: (s) => Option.match(s.retentionPayloadPeriod, { onNone: () => true, onSome: (p) => Duration.lessThanOrEqualTo(p, s.retentionPeriod) })
  })
)
export type LifecycleSettings = Config.Config.Success<typeof LifecycleSettings>

/** Node's extra CA file (Node reads it itself at startup; listed for completeness). */
export const nodeExtraCaCerts = Config.option(Config.string("NODE_EXTRA_CA_CERTS")).pipe(
  Config.withDescription(describe("NODE_EXTRA_CA_CERTS"))
)

const slotsSetting = (name: string, most: number) => optionalWholeNumber(name, 1, most)

/** Most deliveries to one receiver origin at once per replica (none: the worker's default, a quarter). */
export const deliveryMaxPerOrigin = slotsSetting("DELIVERY_MAX_PER_ORIGIN", 128)

/** Most push jobs to one account's bridge at once per replica (none: the worker's default, a quarter). */
export const pushMaxPerBridge = slotsSetting("CRM_PUSH_MAX_PER_BRIDGE", 10)

/** The fair shares of the workers (read again where each worker starts; listed here so `serve` checks them first). */
export const FairShares = Config.all({ deliveryMaxPerOrigin, pushMaxPerBridge })

/**
 * The heap budget's defaults by ROLE. A worker-only replica serves no request bursts: a tight budget
 * holds a backlog's drain under 150 MiB for about 15 % more CPU per delivery. A replica that serves
 * the APIs keeps a young generation its requests' garbage fits in: the tight budget costs the Event
 * API about a third more CPU per request (docs/operating.md, Memory).
 */
export const heapDefaults = (role: Role): { readonly semiSpaceMiB: number; readonly growthPercent: number } =>
  role === "worker" ? { semiSpaceMiB: 2, growthPercent: 50 } : { semiSpaceMiB: 8, growthPercent: 100 }

/** The server's heap budget (Heap.bound): each setting, else its default for ROLE. */
export const HeapSettings = Config.map(
  Config.all({
    role,
    semiSpaceMiB: optionalWholeNumber("HEAP_SEMI_SPACE_MIB", 0, 1024, " of MiB"),
    growthPercent: optionalWholeNumber("HEAP_GROWTH_PERCENT", 0, 1000)
  }),
  (set) => {
    const defaults = heapDefaults(set.role)
    return {
      semiSpaceMiB: Option.getOrElse(set.semiSpaceMiB, () => defaults.semiSpaceMiB),
      growthPercent: Option.getOrElse(set.growthPercent, () => defaults.growthPercent)
    }
  }
)
export type HeapSettings = Config.Config.Success<typeof HeapSettings>

/** The bound on an account's active subscriptions (up to PostgreSQL's integer, which counts them). */
export const maxSubscriptionsPerAccount = wholeNumber("MAX_SUBSCRIPTIONS_PER_ACCOUNT", 100, 1, 2_147_483_647)

/** The settings `serve` needs. */
export const Settings = Config.all({
  port,
  adminPort,
  adminHost,
  adminToken,
  portal: PortalSettings,
  databaseUrl,
  databaseSessionUrl,
  databasePoolSize,
  dataDir,
  masterKey,
  masterKeyPrevious,
  role,
  logLevel,
  fairShares: FairShares,
  tracing: TracingSettings,
  publicEdge: PublicEdgeSettings,
  lifecycle: LifecycleSettings,
  heap: HeapSettings,
  maxSubscriptionsPerAccount
})
export type Settings = Config.Config.Success<typeof Settings>

/** The settings the CLI needs to find the database or the running server. */
export const CliSettings = Config.all({
  adminToken,
  databaseUrl,
  databasePoolSize,
  dataDir,
  logLevel,
  masterKey,
  masterKeyPrevious,
  portal: PortalSettings,
  maxSubscriptionsPerAccount
})
export type CliSettings = Config.Config.Success<typeof CliSettings>
