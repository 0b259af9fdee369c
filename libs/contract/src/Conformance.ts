/**
 * The bridge conformance report: which svc.crm.v1 rules a bridge was checked
 * against, how each check ended (PASS / WARN / FAIL / SKIP) with redacted evidence
 * and a hint, and the level the bridge earns. The CLI's `--json`, the
 * internal API's check route and the Integrations area share it.
 */
import { Schema } from "effect"

/**
 * How one check ended. `warn` passes (it never costs a level) but notes where
 * the bridge meets MCP's own schema and not the contract's stricter wording,
 * or answers in a way the contract does not specify (a bare MCP tool error).
 */
export const CheckStatus = Schema.Literal("pass", "warn", "fail", "skip").annotations({ identifier: "ConformanceCheckStatus" })
export type CheckStatus = typeof CheckStatus.Type

/**
 * A level of the check: `read-only` is safe on a production tenant (it writes
 * nothing); `writes` creates labelled test records and needs a test tenant.
 */
export const Level = Schema.Literal("read-only", "writes").annotations({ identifier: "ConformanceLevel" })
export type Level = typeof Level.Type

/** The level a bridge earns: no check of the level (nor of the levels below) failed; a warning does not fail. */
export const EarnedLevel = Schema.Literal("none", "read-only", "writes").annotations({ identifier: "ConformanceEarnedLevel" })
export type EarnedLevel = typeof EarnedLevel.Type

/**
 * One exchange a check made, as a person can read it: what was sent and what
 * came back, with credentials and the bridge's own text redacted.
 */
export const Evidence = Schema.Struct({
  /** e.g. `POST https://bridge.example/crm/contacts/search {"tenant_id":"t-1",...}`; never a credential. */
  sent: Schema.String,
  /** e.g. `200 application/json {"contact":null}`; remote strings shown as `<text, 12 chars>`. */
  received: Schema.String,
  duration_ms: Schema.Number
}).annotations({ identifier: "ConformanceEvidence" })
export type Evidence = typeof Evidence.Type

/** One check: the rule it proves (quoted from the contract), its outcome, evidence and a hint. */
export const CheckResult = Schema.Struct({
  /** Stable id, e.g. `capabilities.version`, `appointments.conflict`. */
  id: Schema.String,
  level: Level,
  /** The contract section the rule is in, e.g. `Operation rules 4`. */
  section: Schema.String,
  /** The rule, quoted verbatim from the contract. */
  rule: Schema.String,
  status: CheckStatus,
  /** One sentence: what was observed (or why the check was skipped). */
  detail: Schema.String,
  /** One line: what to change in the bridge when the check fails or warns. */
  hint: Schema.String,
  evidence: Schema.Array(Evidence)
}).annotations({ identifier: "ConformanceCheck" })
export type CheckResult = typeof CheckResult.Type

/** The whole report of one run. */
export const Report = Schema.Struct({
  contract_version: Schema.String,
  transport: Schema.String,
  url: Schema.String,
  tenant_id: Schema.String,
  credential: Schema.Literal("api_key", "oauth"),
  /** The level that was asked for: `writes` only with `--writes` on a test tenant. */
  requested_level: Level,
  earned_level: EarnedLevel,
  /** True when the requested level was earned. */
  passed: Schema.Boolean,
  counts: Schema.Struct({ pass: Schema.Int, warn: Schema.Int, fail: Schema.Int, skip: Schema.Int }),
  started_at: Schema.String,
  duration_ms: Schema.Number,
  checks: Schema.Array(CheckResult)
}).annotations({ identifier: "ConformanceReport" })
export type Report = typeof Report.Type

/** Body of `POST /v1/accounts/{id}/connections/{tenantId}/check`. */
export const CheckRequest = Schema.Struct({
  /** Also run the write level: creates labelled test records; only on a test tenant. */
  writes: Schema.optionalWith(Schema.Boolean, { exact: true, default: () => false })
}).annotations({ identifier: "ConformanceCheckRequest" })
export type CheckRequest = typeof CheckRequest.Type
