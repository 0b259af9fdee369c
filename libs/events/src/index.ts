/**
 * @crm-relay/events — the Event API's domain: accounts, integration keys,
 * subscriptions, rate limiting, the perform-list preview, and the HTTP
 * implementation of the contract's `EventApi`.
 */
export * as Accounts from "./Accounts.js"
export * as Deliveries from "./Deliveries.js"
export * as DeliverySchedule from "./DeliverySchedule.js"
export * as DeliveryWorker from "./DeliveryWorker.js"
export * as Destination from "./Destination.js"
export { DestinationKinds } from "./DestinationKinds.js"
export * as Destinations from "./Destinations.js"
export * as ErrorResponses from "./ErrorResponses.js"
export * as EventApiLive from "./EventApiLive.js"
export * as FailedKeys from "./FailedKeys.js"
export * as Fanout from "./Fanout.js"
export * as IntegrationKeys from "./IntegrationKeys.js"
export * as KeyTags from "./KeyTags.js"
export * as NatsDestination from "./NatsDestination.js"
export * as Page from "./Page.js"
export * as Preview from "./Preview.js"
export * as RabbitmqDestination from "./RabbitmqDestination.js"
export * as RateLimiter from "./RateLimiter.js"
export * as Recoveries from "./Recoveries.js"
export * as SigningSecrets from "./SigningSecrets.js"
export * as SubscriptionLifecycle from "./SubscriptionLifecycle.js"
export * as Subscriptions from "./Subscriptions.js"
export * as WebhookDestination from "./WebhookDestination.js"
export * as WebhookSigner from "./WebhookSigner.js"
