/**
 * What the outcome tests share: the pipeline's Layers on a test database (the reference bridge, real
 * egress), an outcome body, an account and its subscriptions.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Accounts, Fanout, IntegrationKeys, KeyTags, Subscriptions } from "@crm-relay/events"
import { ReferenceBridge } from "@crm-relay/reference-bridge"
import { Duration, Effect, Layer, Schedule, Schema } from "effect"
import { Connections } from "../src/Connections.js"
import { CrmPushJobs } from "../src/CrmPush/Jobs.js"
import { CrmPushReceipts } from "../src/CrmPush/Receipts.js"
import { CrmPushRetry } from "../src/CrmPush/Retry.js"
import { Outcomes } from "../src/Outcomes/Outcomes.js"
import { CallOutcome } from "@crm-relay/contract/CallOutcome"
import { Routing } from "../src/Routing.js"
import { ConnectionsLive, settings, TENANT } from "./ConnectionsHarness.js"

/** The pipeline with the real retry schedule (`Schedules.postCallRetry`). */
export const PipelineWithPostCallRetry = Outcomes.Default.pipe(
  Layer.provideMerge(Layer.mergeAll(
    Routing.Default,
    CrmPushJobs.Default,
    CrmPushReceipts.Default,
    Fanout.Fanout.Default,
    Subscriptions.Subscriptions.Default,
    IntegrationKeys.IntegrationKeys.Default.pipe(Layer.provide(KeyTags.layerTest))
  )),
  Layer.provideMerge(ConnectionsLive)
)

/** The pipeline with a short retry schedule, on the real clock. */
export const PipelineLive = PipelineWithPostCallRetry.pipe(
  Layer.provideMerge(Layer.succeed(CrmPushRetry, {
    schedule: Schedule.spaced(Duration.millis(50)).pipe(Schedule.intersect(Schedule.recurs(3)))
  }))
)

const decode = Schema.decodeUnknownSync(CallOutcome)

export const outcomeFor = (accountId: string, extra: Record<string, unknown> = {}) =>
  decode({
    account_id: accountId,
    tenant_id: TENANT.tenantId,
    classification: "lead",
    source: "Receptionist (phone)",
    tags: ["inbound"],
    caller: {
      full_name: "Grace Hopper",
      first_name: "Grace",
      last_name: "Hopper",
      phones: ["+1 555 0199"],
      emails: ["grace@example.com"],
      address: "2 Compiler Road"
    },
    lead: { job_type: "Leak", summary: "Kitchen tap leaks", notes: "", urgency: "" },
    ...extra
  })

/** A subscription of `accountId` to `event`, under a key of its own (https://hooks.example.com/all, …/leads, …/bookings). */
export const subscribe = (accountId: string, event: "all" | "lead" | "booking") =>
  Effect.gen(function*() {
    const key = yield* (yield* IntegrationKeys.IntegrationKeys).create(accountId)
    yield* (yield* Subscriptions.Subscriptions).create({
      accountId: Schema.decodeSync(Accounts.AccountId)(accountId),
      keyId: key.id,
      targetUrl: event === "all" ? "https://hooks.example.com/all" : `https://hooks.example.com/${event}s`,
      event
    })
  })

/** A live account with tenant t-1 connected over REST with its API key, and one `all` subscription. */
export const connectedAccount = (mode: "live" | "demo" = "live", connect = true) =>
  Effect.gen(function*() {
    const bridge = yield* ReferenceBridge.ReferenceBridge
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ id: string }>`INSERT INTO accounts (name, mode) VALUES ('Push test', ${mode}) RETURNING id`
    const accountId = row!.id
    if (connect) yield* (yield* Connections).set(accountId, TENANT.tenantId, settings(bridge, { transport: "rest", auth: "api_key" }))
    yield* subscribe(accountId, "all")
    return accountId
  })

