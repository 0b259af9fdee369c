/** Starts a reference bridge for one test, with an HTTPS agent that trusts it. */
import { Certificate } from "@crm-relay/testing"
import { Effect } from "effect"
import type { ReferenceBridgeOptions } from "../../src/ReferenceBridge.js"
import * as ReferenceBridge from "../../src/ReferenceBridge.js"
import { TENANTS } from "./fixtures.js"
import * as H from "./https.js"

/** One certificate for every bridge of a test file: generation is the slow part of a start. */
export const TLS = await Effect.runPromise(Certificate.generateTlsMaterial())

/** A bridge (two tenants, memory store) and an agent trusting its CA; both end with the scope. */
export const startBridge = (options: Partial<ReferenceBridgeOptions> = {}) =>
  Effect.gen(function*() {
    const bridge = yield* ReferenceBridge.make({ tenants: TENANTS, tls: TLS, ...options })
    const agent = yield* Effect.acquireRelease(Effect.sync(() => H.agent(bridge.ca)), (a) => Effect.sync(() => a.destroy()))
    return { bridge, agent }
  })
