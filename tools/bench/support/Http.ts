/**
 * JSON requests of a benchmark's setup and load (accounts, keys, outcomes):
 * Bearer-authenticated, over one undici Agent that the scope closes. A
 * non-2xx answer is a typed failure naming the request, its status and body.
 */
import { Data, Effect, type Scope } from "effect"
import { Agent, fetch } from "undici"

/** A request was not answered 2xx (or not at all). */
export class RequestFailed extends Data.TaggedError("RequestFailed")<{ readonly message: string }> {}

/** Sends `body` (if any) as JSON with `token`, and answers the JSON object of a 2xx answer ({} when empty). */
export type JsonRequest = (
  method: string,
  url: string,
  token: string,
  body?: unknown
) => Effect.Effect<Record<string, unknown>, RequestFailed>

/** A JSON client for the scope, at most `connections` connections per origin. */
export const jsonClient = (connections: number): Effect.Effect<JsonRequest, never, Scope.Scope> =>
  Effect.map(
    Effect.acquireRelease(
      Effect.sync(() => new Agent({ connections, pipelining: 1, keepAliveTimeout: 60_000 })),
      (dispatcher) => Effect.promise(() => dispatcher.close())
    ),
    (dispatcher): JsonRequest => (method, url, token, body) =>
      Effect.tryPromise({
        try: async () => {
          const response = await fetch(url, {
            method,
            headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
            ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
            dispatcher
          })
          return { ok: response.ok, status: response.status, text: await response.text() }
        },
        catch: (error) => new RequestFailed({ message: `${method} ${url}: ${String(error)}` })
      }).pipe(
        Effect.flatMap(({ ok, status, text }) =>
          ok
            ? Effect.try({
              try: () => (text === "" ? {} : (JSON.parse(text) as Record<string, unknown>)),
              catch: () => new RequestFailed({ message: `${method} ${url}: ${status} with a body that is not JSON` })
            })
            : Effect.fail(new RequestFailed({ message: `${method} ${url}: ${status} ${text}` }))
        )
      )
  )
