/**
 * `npm run demo` end to end, as an operator runs it from the repository root.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Schedule } from "effect"
import { cloneLike, groupAlive, runScript, shellEnv } from "./support/Shell.js"

describe("npm run demo", () => {
  it.scopedLive("plays the call and prints every hop: bridge receipts, the push job, a delivery with a verified signature; exits 0 and leaves nothing running", () =>
    Effect.gen(function*() {
      const dir = yield* cloneLike("crm-relay-demo-test-")
      const run = yield* runScript("npm run demo", dir, shellEnv())
      const output = run.output()
      expect(run.code, output).toBe(0)
      for (
        const line of [
          "EGRESS_ALLOW_PRIVATE=127.0.0.1/32",
          "NODE_EXTRA_CA_CERTS=",
          "bridge answered svc.crm.v1",
          "appointments.create → appointment",
          "accepted: route push",
          "succeeded after 1 attempt(s)",
          "receipt leads.create",
          "leads.create → 200 (Idempotency-Key",
          "signature verified with the account's signing secret",
          "delivered after 1 attempt(s), the receiver answered 200",
          "Every hop passed"
        ]
      ) expect(output, output).toContain(line)
      // The demo stopped the server it started: nothing of its process group is left.
      yield* Effect.sync(() => groupAlive(run.pid)).pipe(
        Effect.repeat({ schedule: Schedule.spaced("200 millis"), while: (alive) => alive, times: 150 })
      )
      expect(groupAlive(run.pid)).toBe(false)
    }), { timeout: 900_000 })
})
