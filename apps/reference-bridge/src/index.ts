/**
 * @crm-relay/reference-bridge — a contract-faithful svc.crm.v1 bridge (REST
 * and MCP, API key and OAuth client credentials) for tests, the demo and as
 * an example for customers.
 */
export * as BridgeControl from "./BridgeControl.js"
export * as BridgeOperations from "./BridgeOperations.js"
export * as BridgeStore from "./BridgeStore.js"
export * as Calendar from "./Calendar.js"
export * as Credentials from "./Credentials.js"
export * as Faults from "./Faults.js"
export * as MemoryStore from "./MemoryStore.js"
export * as Recorder from "./Recorder.js"
export * as ReferenceBridge from "./ReferenceBridge.js"
export * as SqlStore from "./SqlStore.js"
