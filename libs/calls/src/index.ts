/**
 * @crm-relay/calls — the call pipeline: bridge connections with encrypted
 * credentials, in-call operations, call outcomes, and the post-call CRM push.
 */
export { Announcement } from "@crm-relay/events"
export * as CallOutcome from "@crm-relay/contract/CallOutcome"
export * as Connections from "./Connections.js"
export * as CrmPushJobs from "./CrmPush/Jobs.js"
export * as CrmPushReceipts from "./CrmPush/Receipts.js"
export * as CrmPushRetry from "./CrmPush/Retry.js"
export * as CrmPushSteps from "./CrmPush/Steps.js"
export * as CrmPushWorker from "./CrmPush/Worker.js"
export * as InCall from "./InCall.js"
export * as Outcomes from "./Outcomes/Outcomes.js"
export * as Routing from "./Routing.js"
