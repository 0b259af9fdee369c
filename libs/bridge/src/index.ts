/**
 * @crm-relay/bridge — the svc.crm.v1 client: REST and MCP transports and API
 * key and OAuth credentials as swappable Layers, safe egress, the closed
 * error union, named retry schedules, receipt checks and idempotency keys.
 */
export * as AddressPolicy from "./AddressPolicy.js"
export * as ApiKeyCredentials from "./ApiKeyCredentials.js"
export { BridgeClient } from "./BridgeClient.js"
export type {
  AppointmentInput,
  AvailabilityWindowInput,
  CallOptions,
  CallPolicy,
  ContactInput,
  ContactQuery,
  LeadInput
} from "./BridgeClient.js"
export { BridgeClients, connectionLayer, credentialsLayer } from "./BridgeClients.js"
export {
  Auth,
  BridgeError,
  Conflict,
  Diagnosis,
  FailureReason,
  MAX_RETRY_AFTER,
  Permanent,
  PermanentKind,
  Transient
} from "./BridgeError.js"
export { BridgeTransport } from "./BridgeTransport.js"
export type { TransportAnswer, TransportRequest } from "./BridgeTransport.js"
export * as Conformance from "./Conformance.js"
export * as ConformanceReport from "./ConformanceReport.js"
export * as Connection from "./Connection.js"
export { Credentials } from "./Credentials.js"
export { BrokerEgress, parseBrokerUrl } from "./BrokerEgress.js"
export type { BrokerProtocol, BrokerTarget } from "./BrokerEgress.js"
export { DnsLookupError, DnsResolver } from "./DnsResolver.js"
export type { ResolvedAddress, StaticAnswer } from "./DnsResolver.js"
export {
  DEFAULT_DEADLINE,
  Egress,
  EgressEncodingRefused,
  EgressNetworkError,
  EgressRefused,
  EgressResponseTooLarge,
  EgressTimeout,
  isEgressError,
  MAX_BODY_BYTES
} from "./Egress.js"
export type {
  EgressError,
  EgressMethod,
  EgressOptions,
  EgressRequest,
  EgressRequestOptions,
  EgressResponse,
  NetworkFailureKind,
  RefusalReason
} from "./Egress.js"
export * as EgressConfig from "./EgressConfig.js"
export * as IdempotencyKeys from "./IdempotencyKeys.js"
export { InvalidConnection } from "./InvalidConnection.js"
export * as McpTransport from "./McpTransport.js"
export * as OAuthCredentials from "./OAuthCredentials.js"
export * as Receipts from "./Receipts.js"
export * as RestTransport from "./RestTransport.js"
export * as Schedules from "./Schedules.js"
export { TokenCache } from "./TokenCache.js"
export { TransportRegistry } from "./TransportRegistry.js"
export type { TransportEntry } from "./TransportRegistry.js"
