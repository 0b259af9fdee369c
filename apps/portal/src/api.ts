/**
 * The page's one way to the server: a client derived from the contract's
 * `PortalApi` (so every payload is described once), over the browser's fetch
 * (same origin: the session cookie goes along). Changes carry the session's
 * CSRF token, read once from GET /api/session.
 */
import { FetchHttpClient, HttpApiClient, HttpClient, HttpClientRequest } from "@effect/platform"
import * as PortalApi from "@crm-relay/contract/PortalApi"
import { Cause, Effect, Option } from "effect"

const make = (csrfToken: string | undefined) =>
  HttpApiClient.make(PortalApi.PortalApi, {
    baseUrl: window.location.origin,
    transformClient: csrfToken === undefined
      ? undefined
      : HttpClient.mapRequest(HttpClientRequest.setHeader(PortalApi.CSRF_HEADER, csrfToken))
  }).pipe(Effect.provide(FetchHttpClient.layer))

/** The client type. */
export type Client = Effect.Effect.Success<ReturnType<typeof make>>

/** A failure as one sentence for the page: the API's own Error object, or what to do when there was no answer. */
export const sentence = (error: unknown): string => {
  if (typeof error === "object" && error !== null) {
    if ("error" in error && typeof error.error === "string") {
      const next = "next_step" in error && typeof error.next_step === "string" ? ` ${error.next_step}` : ""
      return `${error.error}${next}`
    }
    if ("_tag" in error && error._tag === "RequestError") return "The server could not be reached. Check your connection and try again."
  }
  return "Something went wrong on our side. Reload the page; if it happens again, ask your account manager."
}

/** A failure's `_tag`, when it has one. */
export const tagOf = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && "_tag" in error && typeof error._tag === "string" ? error._tag : undefined

/** What a call ended with: its value, or its failure as a sentence (and tag). */
export type Result<A> =
  | { readonly ok: true; readonly value: A }
  | { readonly ok: false; readonly error: string; readonly tag: string | undefined; readonly field: string | undefined }

const fieldOf = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && "field" in error && typeof error.field === "string" ? error.field : undefined

/** Runs a call; never rejects. */
export const run = <A, E>(effect: Effect.Effect<A, E>): Promise<Result<A>> =>
  Effect.runPromise(
    effect.pipe(
      Effect.map((value): Result<A> => ({ ok: true, value })),
      Effect.catchAllCause((cause) => {
        const failure = Cause.failureOption(cause)
        const error = Option.getOrUndefined(failure)
        return Effect.succeed<Result<A>>({ ok: false, error: sentence(error), tag: tagOf(error), field: fieldOf(error) })
      })
    )
  )

/** The session (without CSRF header) and then a client that changes things with it. */
export const connect = Effect.gen(function*() {
  const reader = yield* make(undefined)
  const session = yield* reader.session.get()
  const client = yield* make(session.csrf_token)
  return { session, client }
})

export { PortalApi }
