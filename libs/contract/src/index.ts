/**
 * @crm-relay/contract — every payload of svc.crm.v1 and of the Event API,
 * described once as Effect Schemas, with the two `HttpApi` classes the
 * server, clients and OpenAPI documents derive from.
 */
export * as BridgeApi from "./BridgeApi.js"
export * as Conformance from "./Conformance.js"
export * as Destinations from "./Destinations.js"
export * as EventApi from "./EventApi.js"
export * as Events from "./Events.js"
export * as Mcp from "./Mcp.js"
export * as OAuth from "./OAuth.js"
export * as Operations from "./Operations.js"
export * as PortalApi from "./PortalApi.js"
export * as Resources from "./Resources.js"
export * as Validation from "./Validation.js"
export * as Values from "./Values.js"
