/**
 * JSON over HTTP for the demo: one request, its status and parsed body.
 */
import { Effect } from "effect"

/** A JSON object as the demo reads it. */
export type Json = Record<string, unknown>

/** Sends `body` as JSON (with a Bearer `token` when given); the answer's JSON object ({} when empty). */
export const jsonRequest = (
  method: string,
  url: string,
  options: { readonly token?: string; readonly body?: unknown } = {}
): Effect.Effect<{ readonly status: number; readonly json: Json }, Error> =>
  Effect.tryPromise({
    try: async (signal) => {
      const response = await fetch(url, {
        method,
        signal,
        headers: {
          ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }),
          ...(options.body === undefined ? {} : { "content-type": "application/json" })
        },
        ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) })
      })
      const text = await response.text()
      const parsed: unknown = text === "" ? {} : JSON.parse(text)
      const json: Json = typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) ? (parsed as Json) : { value: parsed }
      return { status: response.status, json }
    },
    catch: (cause) => new Error(`${method} ${url} failed: ${cause instanceof Error ? cause.message : String(cause)}`)
  })
