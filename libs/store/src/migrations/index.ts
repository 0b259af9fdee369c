/**
 * Every migration, in order. Keys are `<id>_<name>`; ids only grow, and a
 * migration is never edited once released (add a new one instead).
 */
import type { Migration } from "../Migration.js"
import eventApi from "./0001_event_api.js"
import connections from "./0002_connections.js"
import callPipeline from "./0003_call_pipeline.js"
import webhookDelivery from "./0004_webhook_delivery.js"
import insertionOrder from "./0005_insertion_order.js"
import traceContext from "./0006_trace_context.js"
import operatorListings from "./0007_operator_listings.js"
import fairQueues from "./0008_fair_queues.js"
import receiverLifecycle from "./0009_receiver_lifecycle.js"
import portal from "./0010_portal.js"
import leanDeliveries from "./0011_lean_deliveries.js"
import eventApiFunctions from "./0012_event_api_functions.js"
import deliveryFinishFunction from "./0013_delivery_finish_function.js"
import outcomeIntakeFunction from "./0014_outcome_intake_function.js"
import outcomeHandoff from "./0015_outcome_handoff.js"
import destinations from "./0016_destinations.js"
import events from "./0017_events.js"
import leanOutcomes from "./0018_lean_outcomes.js"
import inlineFanOut from "./0019_inline_fan_out.js"
import outcomeEvents from "./0020_outcome_events.js"
import noSubscriptionKey from "./0021_no_subscription_key.js"
import finalAttempt from "./0022_final_attempt.js"
import leanDeliveryIndexes from "./0023_lean_delivery_indexes.js"
import claimByKey from "./0024_claim_by_key.js"
import originHealth from "./0025_origin_health.js"

/** The ordered record of migrations. */
export const migrations: Readonly<Record<string, Migration>> = {
  "0001_event_api": eventApi,
  "0002_connections": connections,
  "0003_call_pipeline": callPipeline,
  "0004_webhook_delivery": webhookDelivery,
  "0005_insertion_order": insertionOrder,
  "0006_trace_context": traceContext,
  "0007_operator_listings": operatorListings,
  "0008_fair_queues": fairQueues,
  "0009_receiver_lifecycle": receiverLifecycle,
  "0010_portal": portal,
  "0011_lean_deliveries": leanDeliveries,
  "0012_event_api_functions": eventApiFunctions,
  "0013_delivery_finish_function": deliveryFinishFunction,
  "0014_outcome_intake_function": outcomeIntakeFunction,
  "0015_outcome_handoff": outcomeHandoff,
  "0016_destinations": destinations,
  "0017_events": events,
  "0018_lean_outcomes": leanOutcomes,
  "0019_inline_fan_out": inlineFanOut,
  "0020_outcome_events": outcomeEvents,
  "0021_no_subscription_key": noSubscriptionKey,
  "0022_final_attempt": finalAttempt,
  "0023_lean_delivery_indexes": leanDeliveryIndexes,
  "0024_claim_by_key": claimByKey,
  "0025_origin_health": originHealth
}
