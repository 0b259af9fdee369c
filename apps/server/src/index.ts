/**
 * @crm-relay/server — the crm-relay binary: public Event API, internal API,
 * workers and the CLI.
 */
export * as Addresses from "./Addresses.js"
export * as AdminError from "./AdminError.js"
export * as AdminOperations from "./AdminOperations.js"
export * as AdminToken from "./AdminToken.js"
export * as BridgeLayers from "./BridgeLayers.js"
export * as InternalApi from "./InternalApi.js"
export * as InternalApiLive from "./InternalApiLive.js"
export * as Logging from "./Logging.js"
export * as Server from "./Server.js"
export * as ServerFile from "./ServerFile.js"
export * as Settings from "./Settings.js"
export * as Workers from "./Workers.js"
