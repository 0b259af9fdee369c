/**
 * The bridge conformance check: runs svc.crm.v1's rules as executable checks
 * against one bridge connection and reports PASS / WARN / FAIL / SKIP per rule,
 * with redacted evidence, a hint, and the level the bridge earns. A WARN
 * never costs a level: it marks what the client accepts but the contract's
 * wording asks more of, or does not specify (a refusal with a bare MCP tool error).
 *
 * - The read-only level (default) writes nothing: it is safe on a production
 *   tenant. The write level (`writes: true`) creates contacts, leads and
 *   appointments labelled as conformance tests: only on a test tenant.
 * - It speaks through the connection's own transport and credential Layers
 *   and the one egress Layer (recorded for the evidence); receipts are judged
 *   field by field against the contract, and the bridge's prose is never
 *   followed nor shown.
 */
import { Cause, Context, Duration, Effect, Layer, Option } from "effect"
import { type Conformance as Contract, Values } from "@crm-relay/contract"
import { BridgeTransport } from "./BridgeTransport.js"
import { credentialsLayer } from "./BridgeClients.js"
import type * as Connection from "./Connection.js"
import { Credentials } from "./Credentials.js"
import { DEFAULT_DEADLINE, Egress } from "./Egress.js"
import { InvalidConnection } from "./InvalidConnection.js"
import type { TokenCache } from "./TokenCache.js"
import { TransportRegistry } from "./TransportRegistry.js"
import { catalog } from "./internal/conformance/catalog.js"
import * as Check from "./internal/conformance/check.js"
import * as Recorder from "./internal/conformance/recorder.js"

/** What to check. */
export interface Options {
  /** The connection under test: transport, URL, credential and tenant. */
  readonly connection: Connection.Connection
  /** Also run the write level (creates labelled test records). Default false. */
  readonly writes?: boolean | undefined
  /** A second tenant's credential (same bridge), for the tenant-binding check; skipped without it. */
  readonly otherTenant?: { readonly tenantId: string; readonly auth: Connection.ConnectionAuth } | undefined
  /** The latency limit per exchange; default the contract's 10 s deadline. */
  readonly latencyLimit?: Duration.DurationInput | undefined
}

/** What a check proves, before it runs: id, level, the contract section and its rule, the hint. */
export interface CheckDescription {
  readonly id: string
  readonly level: Contract.Level
  readonly section: string
  readonly rule: string
  readonly hint: string
}

/** Every check that may run for `transport` (`rest` or `mcp`), in running order (e.g. to list them before a run). */
export const describe = (transport: string): ReadonlyArray<CheckDescription> =>
  catalog(transport).map(({ hint, id, level, rule, section }) => ({ id, level, section, rule, hint }))

/** The ids of every check that may run for `transport`, in running order. */
export const checkIds = (transport: string): ReadonlyArray<string> => describe(transport).map((check) => check.id)

const LEVEL_ORDER: Record<Contract.Level, number> = { "read-only": 0, "writes": 1 }

/** The level earned: no check of it, nor of the levels below, failed (passed, warned or skipped). */
const earnedLevel = (checks: ReadonlyArray<Contract.CheckResult>, writes: boolean): Contract.EarnedLevel => {
  const failed = (level: Contract.Level) => checks.some((c) => c.level === level && c.status === "fail")
  if (failed("read-only")) return "none"
  return writes && !failed("writes") ? "writes" : "read-only"
}

/** Runs the checks against `options.connection` and answers the report; only an unusable connection fails. */
export const run = (
  options: Options
): Effect.Effect<Contract.Report, InvalidConnection, Egress | TokenCache | TransportRegistry> =>
  Effect.gen(function*() {
    const connection = options.connection
    if (connection.tenantId === "") {
      return yield* new InvalidConnection({ field: "tenant", message: "The tenant ID must not be empty." })
    }
    const writes = options.writes === true
    const clock = yield* Effect.clock
    const startedMillis = clock.unsafeCurrentTimeMillis()
    const recorder = yield* Recorder.make(yield* Egress)
    const registry = yield* TransportRegistry
    const transportLayer = yield* registry.layer(connection.transport.kind, connection.transport.url)
    const egress = Layer.succeed(Egress, recorder.egress)

    const built = yield* Layer.build(
      Layer.merge(transportLayer, credentialsLayer(connection)).pipe(Layer.provide(egress))
    )
    const otherCredentials = options.otherTenant === undefined
      ? Option.none<Credentials["Type"]>()
      : Option.some(Context.get(
        yield* Layer.build(
          credentialsLayer({
            ...connection,
            tenantId: options.otherTenant.tenantId,
            auth: options.otherTenant.auth
          }).pipe(Layer.provide(egress))
        ),
        Credentials
      ))

    const setup: Check.Setup = {
      transportKind: connection.transport.kind,
      url: connection.transport.url,
      tenantId: connection.tenantId,
      transport: Context.get(built, BridgeTransport),
      credentials: Context.get(built, Credentials),
      otherCredentials,
      egress: recorder.egress,
      exchanges: recorder.exchanges,
      latencyLimitMs: Duration.toMillis(Duration.decode(options.latencyLimit ?? DEFAULT_DEADLINE)),
      now: new Date(startedMillis)
    }
    const state = Check.initialState()

    const results: Array<Contract.CheckResult> = []
    for (const check of catalog(connection.transport.kind)) {
      const before = (yield* recorder.exchanges).length
      const outcome: Check.Outcome = check.level === "writes" && !writes
        ? { status: "skip", detail: "The write level runs only with --writes, on a test tenant." }
        : yield* check.run(setup, state).pipe(
          Effect.catchAllDefect((defect) =>
            Effect.as(
              Effect.logError(`The conformance check ${check.id} stopped on an unexpected error.`, Cause.die(defect)),
              { status: "fail", detail: "The check could not be completed (an unexpected error, logged); run it again." } satisfies Check.Outcome
            )
          ),
          Effect.withSpan(`Conformance.${check.id}`)
        )
      const exchanges = (yield* recorder.exchanges).slice(before)
      results.push({
        id: check.id,
        level: check.level,
        section: check.section,
        rule: check.rule,
        status: outcome.status,
        detail: outcome.detail,
        hint: outcome.hint ?? check.hint,
        evidence: exchanges.map(Recorder.evidence)
      })
    }
    // Read-only checks first (the transport rules run last, over every exchange, but belong to that level).
    const checks = results
      .map((check, index) => ({ check, index }))
      .sort((a, b) => LEVEL_ORDER[a.check.level] - LEVEL_ORDER[b.check.level] || a.index - b.index)
      .map(({ check }) => check)
    const earned = earnedLevel(checks, writes)
    const count = (status: Contract.CheckStatus) => checks.filter((c) => c.status === status).length
    return {
      contract_version: Values.CONTRACT_VERSION,
      transport: connection.transport.kind,
      url: connection.transport.url,
      tenant_id: connection.tenantId,
      credential: connection.auth.type,
      requested_level: writes ? "writes" : "read-only",
      earned_level: earned,
      passed: earned === (writes ? "writes" : "read-only"),
      counts: { pass: count("pass"), warn: count("warn"), fail: count("fail"), skip: count("skip") },
      started_at: new Date(startedMillis).toISOString(),
      duration_ms: clock.unsafeCurrentTimeMillis() - startedMillis,
      checks
    } satisfies Contract.Report
  }).pipe(Effect.scoped, Effect.withSpan("Conformance.run"))
