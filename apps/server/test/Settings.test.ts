import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Duration, Effect, LogLevel, Option, Redacted } from "effect"
import * as OpenFileLimit from "../src/config/OpenFileLimit.js"
import * as PublicEdge from "../src/config/PublicEdge.js"
import * as Settings from "../src/config/Settings.js"

const withEnv = (env: Record<string, string>) => Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))

describe("Settings", () => {
  it("lists every setting of DESIGN.md's configuration table (plus the pool size), each with a default and a description", () => {
    expect(Settings.table.map((s) => s.name)).toEqual([
      "PORT",
      "ADMIN_PORT",
      "ADMIN_HOST",
      "PORTAL_PORT",
      "PORTAL_HOST",
      "PORTAL_PUBLIC_URL",
      "ADMIN_TOKEN",
      "DATABASE_URL",
      "DATABASE_SESSION_URL",
      "DATABASE_POOL_SIZE",
      "DATA_DIR",
      "MASTER_KEY",
      "MASTER_KEY_PREVIOUS",
      "DELIVERY_MAX_PER_ORIGIN",
      "CRM_PUSH_MAX_PER_BRIDGE",
      "ROLE",
      "LOG_LEVEL",
      "EGRESS_ALLOW_PRIVATE",
      "OTEL_EXPORTER_OTLP_ENDPOINT",
      "OTEL_TRACES_SAMPLER_ARG",
      "OTEL_SERVICE_NAME",
      "PUBLIC_HEAD_TIMEOUT_MS",
      "PUBLIC_REQUEST_TIMEOUT_MS",
      "PUBLIC_KEEP_ALIVE_TIMEOUT_MS",
      "PUBLIC_MAX_CONNECTIONS",
      "PORTAL_MAX_CONNECTIONS",
      "PUBLIC_CONNECTION_RESERVE",
      "FAILED_KEY_LIMIT",
      "FAILED_KEY_HOLD_MS",
      "MAX_SUBSCRIPTIONS_PER_ACCOUNT",
      "TRUSTED_PROXIES",
      "RETENTION_PERIOD",
      "RETENTION_PAYLOAD_PERIOD",
      "RETENTION_BATCH_SIZE",
      "WEBHOOK_DISABLE_AFTER",
      "RECEIVER_PROBE_MAX_INTERVAL",
      "WEBHOOK_DISABLE_MIN_FAILURES",
      "HEAP_SEMI_SPACE_MIB",
      "HEAP_GROWTH_PERCENT",
      "NODE_EXTRA_CA_CERTS"
    ])
    for (const setting of Settings.table) {
      expect(setting.default.length).toBeGreaterThan(0)
      expect(setting.description).toMatch(/\.$/)
    }
    expect(Settings.table.filter((s) => s.secret).map((s) => s.name)).toEqual([
      "ADMIN_TOKEN",
      "DATABASE_URL",
      "DATABASE_SESSION_URL",
      "MASTER_KEY",
      "MASTER_KEY_PREVIOUS"
    ])
  })

  it.effect("Integrations area: PORTAL_PORT 8082 on PORTAL_HOST 127.0.0.1 by default; PORTAL_PUBLIC_URL loses a trailing slash and must be http(s)", () =>
    Effect.gen(function*() {
      expect(yield* withEnv({})(Settings.PortalSettings)).toEqual({ port: 8082, host: "127.0.0.1", publicUrl: Option.none() })
      const set = yield* withEnv({ PORTAL_PORT: "0", PORTAL_HOST: "0.0.0.0", PORTAL_PUBLIC_URL: "https://integrations.example.com/" })(Settings.PortalSettings)
      expect(set).toEqual({ port: 0, host: "0.0.0.0", publicUrl: Option.some("https://integrations.example.com") })
      const refused = yield* Effect.either(withEnv({ PORTAL_PUBLIC_URL: "ftp://example.com" })(Settings.PortalSettings))
      expect(refused._tag).toBe("Left")
    }))

  it.effect("defaults: PORT 8080, ADMIN 127.0.0.1:8081, DATA_DIR ./.data, ROLE all, LOG_LEVEL Info, no database URL (PGlite)", () =>
    Effect.gen(function*() {
      const settings = yield* Settings.Settings.pipe(withEnv({}))
      expect(settings).toMatchObject({
        port: 8080,
        adminPort: 8081,
        adminHost: "127.0.0.1",
        dataDir: "./.data",
        role: "all",
        databasePoolSize: 10,
        tracing: { sampleRatio: 0.1, serviceName: "crm-relay" }
      })
      expect(settings.logLevel).toEqual(LogLevel.Info)
      expect(Option.isNone(settings.databaseUrl)).toBe(true)
      expect(Option.isNone(settings.adminToken)).toBe(true)
    }))

  it.effect("Receiver lifecycle settings: retention 30 days (payloads as long), batches of 500, disabled after 5 days once 3 deliveries failed within a day; durations are read as written", () =>
    Effect.gen(function*() {
      const defaults = yield* Settings.LifecycleSettings.pipe(withEnv({}))
      expect(Duration.toMillis(defaults.retentionPeriod)).toBe(Duration.toMillis(Duration.days(30)))
      expect(Option.isNone(defaults.retentionPayloadPeriod)).toBe(true)
      expect(defaults.retentionBatchSize).toBe(500)
      expect(Duration.toMillis(defaults.webhookDisableAfter)).toBe(Duration.toMillis(Duration.days(5)))
      expect(defaults.webhookDisableMinFailures).toBe(3)
      const set = yield* Settings.LifecycleSettings.pipe(
        withEnv({ RETENTION_PERIOD: "90 days", RETENTION_PAYLOAD_PERIOD: "7 days", WEBHOOK_DISABLE_AFTER: "36 hours" })
      )
      expect(Duration.toMillis(set.retentionPeriod)).toBe(Duration.toMillis(Duration.days(90)))
      expect(Option.map(set.retentionPayloadPeriod, Duration.toMillis)).toEqual(Option.some(Duration.toMillis(Duration.days(7))))
      expect(Duration.toMillis(set.webhookDisableAfter)).toBe(Duration.toMillis(Duration.hours(36)))
    }))

  it.effect("Bad input: a retention period of zero or nonsense, a payload period longer than the rows', a batch of 0 → a clear error naming the setting", () =>
    Effect.gen(function*() {
      const refused = (env: Record<string, string>) => Effect.map(Effect.flip(Settings.LifecycleSettings.pipe(withEnv(env))), String)
      expect(yield* refused({ RETENTION_PERIOD: "0 days" })).toContain("RETENTION_PERIOD must be a positive duration such as \"30 days\"; got \"0 days\"")
      expect(yield* refused({ RETENTION_PERIOD: "a while" })).toContain("RETENTION_PERIOD must be a positive duration")
      expect(yield* refused({ RETENTION_PAYLOAD_PERIOD: "60 days" })).toContain("RETENTION_PAYLOAD_PERIOD cannot be longer than RETENTION_PERIOD")
      expect(yield* refused({ RETENTION_BATCH_SIZE: "0" })).toContain("RETENTION_BATCH_SIZE must be a whole number from 1 to 10000")
      expect(yield* refused({ WEBHOOK_DISABLE_AFTER: "-1 hours" })).toContain("WEBHOOK_DISABLE_AFTER must be a positive duration")
      expect(yield* refused({ WEBHOOK_DISABLE_MIN_FAILURES: "0" })).toContain("WEBHOOK_DISABLE_MIN_FAILURES must be a whole number from 1 to 1000")
    }))

  it.effect("the heap budget: semi-spaces of 8 MiB and 100 % old-generation growth by default, 2 MiB and 50 % on a ROLE=worker replica; a setting wins; 0 leaves either to V8; anything else outside its range is refused by name", () =>
    Effect.gen(function*() {
      expect(yield* Settings.HeapSettings.pipe(withEnv({}))).toEqual({ semiSpaceMiB: 8, growthPercent: 100 })
      expect(yield* Settings.HeapSettings.pipe(withEnv({ ROLE: "api" }))).toEqual({ semiSpaceMiB: 8, growthPercent: 100 })
      expect(yield* Settings.HeapSettings.pipe(withEnv({ ROLE: "worker" }))).toEqual({ semiSpaceMiB: 2, growthPercent: 50 })
      expect(yield* Settings.HeapSettings.pipe(withEnv({ ROLE: "worker", HEAP_SEMI_SPACE_MIB: "8" }))).toEqual({ semiSpaceMiB: 8, growthPercent: 50 })
      expect(yield* Settings.HeapSettings.pipe(withEnv({ ROLE: "worker", HEAP_GROWTH_PERCENT: "100" }))).toEqual({ semiSpaceMiB: 2, growthPercent: 100 })
      expect(yield* Settings.HeapSettings.pipe(withEnv({ HEAP_SEMI_SPACE_MIB: "0", HEAP_GROWTH_PERCENT: "0" }))).toEqual({ semiSpaceMiB: 0, growthPercent: 0 })
      const refused = (env: Record<string, string>) => Effect.map(Effect.flip(Settings.HeapSettings.pipe(withEnv(env))), String)
      expect(yield* refused({ HEAP_SEMI_SPACE_MIB: "-1" })).toContain("HEAP_SEMI_SPACE_MIB must be a whole number of MiB from 0 to 1024")
      expect(yield* refused({ HEAP_SEMI_SPACE_MIB: "lots" })).toContain("HEAP_SEMI_SPACE_MIB")
      expect(yield* refused({ HEAP_GROWTH_PERCENT: "1001" })).toContain("HEAP_GROWTH_PERCENT must be a whole number from 0 to 1000")
    }))

  it.effect("MAX_SUBSCRIPTIONS_PER_ACCOUNT: 100 by default; 0, past PostgreSQL's integer or not whole is refused at start with the numbers", () =>
    Effect.gen(function*() {
      // Issue 35: "a bound of 0 or beyond the type → refused at start with the numbers".
      expect((yield* Settings.Settings.pipe(withEnv({}))).maxSubscriptionsPerAccount).toBe(100)
      expect((yield* Settings.Settings.pipe(withEnv({ MAX_SUBSCRIPTIONS_PER_ACCOUNT: "2147483647" }))).maxSubscriptionsPerAccount).toBe(2_147_483_647)
      const refused = (value: string) =>
        Effect.map(Effect.flip(Settings.Settings.pipe(withEnv({ MAX_SUBSCRIPTIONS_PER_ACCOUNT: value }))), String)
      for (const value of ["0", "-1", "2147483648", "1e12"]) {
        expect(yield* refused(value)).toContain("MAX_SUBSCRIPTIONS_PER_ACCOUNT must be a whole number from 1 to 2147483647")
      }
      for (const value of ["1.5", "many"]) expect(yield* refused(value)).toContain("MAX_SUBSCRIPTIONS_PER_ACCOUNT")
    }))

  it.effect("secrets are Redacted (never printed) and an empty value counts as unset", () =>
    Effect.gen(function*() {
      const settings = yield* Settings.Settings.pipe(
        withEnv({
          DATABASE_URL: "postgres://user:hunter2@db/x",
          DATABASE_SESSION_URL: "postgres://user:hunter3@primary/x",
          ADMIN_TOKEN: "tok-secret",
          MASTER_KEY: ""
        })
      )
      expect(Redacted.value(Option.getOrThrow(settings.databaseSessionUrl))).toBe("postgres://user:hunter3@primary/x")
      expect(JSON.stringify(settings)).not.toContain("hunter3")
      const url = Option.getOrThrow(settings.databaseUrl)
      expect(Redacted.isRedacted(url)).toBe(true)
      expect(Redacted.value(url)).toBe("postgres://user:hunter2@db/x")
      expect(String(url)).not.toContain("hunter2")
      expect(JSON.stringify(settings)).not.toContain("hunter2")
      expect(JSON.stringify(settings)).not.toContain("tok-secret")
      expect(Option.isNone(settings.masterKey)).toBe(true)
    }))

  it.effect("invalid values are refused with a clear error", () =>
    Effect.gen(function*() {
      for (const env of [{ PORT: "http" }, { PORT: "70000" }, { ROLE: "everything" }, { LOG_LEVEL: "loud" }, { DATABASE_POOL_SIZE: "0" }, { OTEL_TRACES_SAMPLER_ARG: "2" }, { OTEL_TRACES_SAMPLER_ARG: "some" }, { PUBLIC_HEAD_TIMEOUT_MS: "0" }, { PUBLIC_KEEP_ALIVE_TIMEOUT_MS: "0" }, { PUBLIC_REQUEST_TIMEOUT_MS: "-1" }, { PUBLIC_MAX_CONNECTIONS: "0" }, { FAILED_KEY_LIMIT: "0" }, { FAILED_KEY_HOLD_MS: "-1" }, { FAILED_KEY_HOLD_MS: "60001" }, { PORTAL_MAX_CONNECTIONS: "0" }, { TRUSTED_PROXIES: "proxy.internal" }, { DELIVERY_MAX_PER_ORIGIN: "0" }, { DELIVERY_MAX_PER_ORIGIN: "129" }, { CRM_PUSH_MAX_PER_BRIDGE: "many" }]) {
        const error = yield* Settings.Settings.pipe(withEnv(env), Effect.flip)
        expect(error._tag).toBe("ConfigError")
      }
      expect((yield* Settings.Settings.pipe(withEnv({ ROLE: "worker", PORT: "0" }))).role).toBe("worker")
      // Fair shares: unset means the worker's default (a quarter of its slots).
      expect((yield* Settings.Settings.pipe(withEnv({ DELIVERY_MAX_PER_ORIGIN: "4" }))).fairShares).toEqual({
        deliveryMaxPerOrigin: Option.some(4),
        pushMaxPerBridge: Option.none()
      })
    }))

  it.effect("the public port's limits: defaults, and a request deadline shorter than the head's is refused with a message saying so", () =>
    Effect.gen(function*() {
      const settings = yield* Settings.Settings.pipe(withEnv({}))
      expect(settings.publicEdge).toMatchObject({
        headTimeoutMs: 10_000,
        requestTimeoutMs: 30_000,
        keepAliveTimeoutMs: 5_000,
        connectionReserve: 256,
        failedKeyLimit: 30,
        failedKeyHoldMs: 5_000,
        portalMaxConnections: 256,
        trustedProxies: []
      })
      expect(Option.isNone(settings.publicEdge.maxConnections)).toBe(true)
      const error = yield* Settings.Settings.pipe(withEnv({ PUBLIC_HEAD_TIMEOUT_MS: "5000", PUBLIC_REQUEST_TIMEOUT_MS: "1000" }), Effect.flip)
      expect(String(error)).toContain("PUBLIC_REQUEST_TIMEOUT_MS must be at least PUBLIC_HEAD_TIMEOUT_MS")
      const proxies = yield* Settings.Settings.pipe(withEnv({ TRUSTED_PROXIES: "10.0.0.0/8, ::1" }))
      expect(proxies.publicEdge.trustedProxies.map((cidr) => cidr.text)).toEqual(["10.0.0.0/8", "::1/128"])
    }))

  it.effect("the connection budget: the open-file limit minus the reserve and the Integrations area's budget by default; a budget above it, or a limit they take whole, is refused at start", () =>
    Effect.gen(function*() {
      const defaults = (yield* Settings.Settings.pipe(withEnv({}))).publicEdge
      const limit = { limit: 2048, source: "/proc/self/limits" } as const
      expect(defaults.portalMaxConnections).toBe(256)
      expect(yield* PublicEdge.budget(defaults, limit)).toBe(2048 - 256 - 256)
      expect(yield* PublicEdge.budget({ ...defaults, maxConnections: Option.some(1000) }, limit)).toBe(1000)
      const tooMany = yield* PublicEdge.budget({ ...defaults, maxConnections: Option.some(1800) }, limit).pipe(Effect.flip)
      expect(String(tooMany)).toContain(
        "PUBLIC_MAX_CONNECTIONS (1800) plus PORTAL_MAX_CONNECTIONS (256) plus PUBLIC_CONNECTION_RESERVE (256) exceeds the open-file limit (2048): lower PUBLIC_MAX_CONNECTIONS to at most 1536"
      )
      const portalTooBig = yield* PublicEdge.budget({ ...defaults, portalMaxConnections: 1900 }, limit).pipe(Effect.flip)
      expect(String(portalTooBig)).toContain("leaves no connection for the public port after PORTAL_MAX_CONNECTIONS (1900) plus PUBLIC_CONNECTION_RESERVE (256)")
      const none = yield* PublicEdge.budget(defaults, { limit: 200, source: "assumed" }).pipe(Effect.flip)
      expect(String(none)).toContain("the open-file limit (200, assumed) leaves no connection for the public port")
      expect(OpenFileLimit.parse("Limit                     Soft Limit           Hard Limit           Units\nMax open files            2048                 4096                 files\n")).toBe(2048)
      expect(OpenFileLimit.parse("Max open files            unlimited            unlimited            files\n")).toBe(Number.POSITIVE_INFINITY)
      const own = yield* OpenFileLimit.read
      expect(own.limit).toBeGreaterThan(0)
    }))
})
