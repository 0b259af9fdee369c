/**
 * The public port's protection as the server applies it: the settings, with
 * the connection budget derived from the open-file limit when not set, and
 * refused at start when it cannot hold (a budget that would leave the
 * database pool, the internal port and outbound connections without files).
 * The Integrations area's listener keeps the same deadlines and its own
 * budget, taken from the open-file limit first.
 */
import type * as AddressPolicy from "@crm-relay/bridge/AddressPolicy"
import { ConfigError, Effect } from "effect"
import type { ConnectionLimits } from "../http/ConnectionLimits.js"
import * as OpenFileLimit from "./OpenFileLimit.js"
import type { PublicEdgeSettings } from "./Settings.js"

/** What `serve` applies to the public port. */
export interface PublicEdge {
  readonly limits: ConnectionLimits
  /** Failed keys per client address per minute. */
  readonly failedKeyLimit: number
  /** Connections the Integrations area's listener holds at most. */
  readonly portalMaxConnections: number
  /** How long the 429 of a refused address is held (its connection unread meanwhile); 0: at once. */
  readonly failedKeyHoldMs: number
  readonly trustedProxies: ReadonlyArray<AddressPolicy.Cidr>
}

/** Budget when the open-file limit is unlimited and none is set: plenty, and still finite. */
const UNLIMITED_BUDGET = 1_000_000

/** The budget for `settings` under `openFiles`, or why none can hold. */
export const budget = (settings: PublicEdgeSettings, openFiles: OpenFileLimit.OpenFileLimit): Effect.Effect<number, ConfigError.ConfigError> => {
  const available = openFiles.limit - settings.connectionReserve - settings.portalMaxConnections
  const others = `PORTAL_MAX_CONNECTIONS (${settings.portalMaxConnections}) plus PUBLIC_CONNECTION_RESERVE (${settings.connectionReserve})`
  const limitText = `the open-file limit (${openFiles.limit}${openFiles.source === "assumed" ? ", assumed" : ""})`
  if (settings.maxConnections._tag === "Some") {
    const wanted = settings.maxConnections.value
    return wanted <= available
      ? Effect.succeed(wanted)
      : Effect.fail(ConfigError.InvalidData(
        ["PUBLIC_MAX_CONNECTIONS"],
        `PUBLIC_MAX_CONNECTIONS (${wanted}) plus ${others} exceeds ${limitText}: ` +
          `lower PUBLIC_MAX_CONNECTIONS to at most ${Math.max(0, available)}, or raise the limit (ulimit -n) before starting.`
      ))
  }
  if (available < 1) {
    return Effect.fail(ConfigError.InvalidData(
      ["PUBLIC_CONNECTION_RESERVE"],
      `${limitText} leaves no connection for the public port after ${others}: ` +
        "raise the limit (ulimit -n), or lower the reserve or the Integrations area's budget."
    ))
  }
  return Effect.succeed(Math.min(available, UNLIMITED_BUDGET))
}

/** The public port's protection from `settings`, logged once. */
export const resolve = (settings: PublicEdgeSettings): Effect.Effect<PublicEdge, ConfigError.ConfigError> =>
  Effect.gen(function*() {
    const openFiles = yield* OpenFileLimit.read
    const maxConnections = yield* budget(settings, openFiles)
    yield* Effect.logInfo("public port limits").pipe(Effect.annotateLogs({
      open_file_limit: Number.isFinite(openFiles.limit) ? openFiles.limit : "unlimited",
      open_file_limit_source: openFiles.source,
      max_connections: maxConnections,
      portal_max_connections: settings.portalMaxConnections,
      connection_reserve: settings.connectionReserve,
      head_timeout_ms: settings.headTimeoutMs,
      request_timeout_ms: settings.requestTimeoutMs,
      keep_alive_timeout_ms: settings.keepAliveTimeoutMs,
      failed_key_limit_per_minute: settings.failedKeyLimit,
      failed_key_hold_ms: settings.failedKeyHoldMs,
      trusted_proxies: settings.trustedProxies.map((cidr) => cidr.text).join(",") || "none"
    }))
    return {
      limits: {
        headTimeoutMs: settings.headTimeoutMs,
        requestTimeoutMs: settings.requestTimeoutMs,
        keepAliveTimeoutMs: settings.keepAliveTimeoutMs,
        maxConnections
      },
      failedKeyLimit: settings.failedKeyLimit,
      failedKeyHoldMs: settings.failedKeyHoldMs,
      portalMaxConnections: settings.portalMaxConnections,
      trustedProxies: settings.trustedProxies
    }
  })
