/**
 * Assertions shared by the egress tests.
 */
import { expect } from "@effect/vitest"
import { Effect } from "effect"

/** An operator-facing message is one readable sentence. */
export const expectOneSentence = (message: string) => {
  expect(message).toMatch(/^[A-Z"0-9[].*\.$/s)
  expect(message).not.toMatch(/\n/)
  expect(message.split(/\.\s+[A-Z]/)).toHaveLength(1)
}

/** Polls `condition` in real time until it holds or `timeoutMs` passes; returns whether it held. */
export const eventually = (condition: () => boolean, timeoutMs = 2000) =>
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
