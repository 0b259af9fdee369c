/**
 * Assertions shared by the egress tests.
 */
import { expect } from "@effect/vitest"
import { Eventually } from "@crm-relay/testing"
import { Duration, Effect } from "effect"

/** An operator-facing message is one readable sentence. */
export const expectOneSentence = (message: string) => {
  expect(message).toMatch(/^[A-Z"0-9[].*\.$/s)
  expect(message).not.toMatch(/\n/)
  expect(message.split(/\.\s+[A-Z]/)).toHaveLength(1)
}

/**
 * Polls `condition` in real time until it holds or `timeoutMs` passes; returns whether it held.
 * `timeoutMs` is a bound against a hang (see Eventually.HANG_BOUND), never a measure of speed.
 */
export const eventually = (condition: () => boolean, timeoutMs = Duration.toMillis(Eventually.HANG_BOUND)) =>
  Effect.async<boolean>((resume) => {
    const started = Date.now()
    const tick = () => {
      if (condition()) return resume(Effect.succeed(true))
      if (Date.now() - started > timeoutMs) return resume(Effect.succeed(false))
      timer = setTimeout(tick, 5)
    }
    let timer = setTimeout(tick, 0)
    return Effect.sync(() => clearTimeout(timer))
  })
