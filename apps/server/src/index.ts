/**
 * @crm-relay/server — the crm-relay binary: public Event API, internal API,
 * workers and the CLI.
 */
export * as Addresses from "./http/Addresses.js"
export * as AdminError from "./cli/AdminError.js"
export * as AdminOperations from "./cli/AdminOperations.js"
export * as AdminToken from "./config/AdminToken.js"
export * as BridgeLayers from "./workers/BridgeLayers.js"
export * as InternalApi from "@crm-relay/contract/InternalApi"
export * as InternalApiLive from "./http/internal/InternalApiLive.js"
export * as Logging from "./observability/Logging.js"
export * as Server from "./http/Server.js"
export * as ServerFile from "./config/ServerFile.js"
export * as Settings from "./config/Settings.js"
export * as Workers from "./workers/Workers.js"
