/**
 * The OAuth 2.0 token endpoint of the reference bridge, exactly as
 * Authentication rule 3 has clients call it: a form POST with
 * `Authorization: Basic` over the form-encoded client id and secret
 * (RFC 6749 §2.3.1), `grant_type=client_credentials`, an optional `scope`;
 * the answer is `{access_token, token_type: "Bearer", expires_in?}`.
 */
import { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, Option, Redacted } from "effect"
import { Credentials, OAuthRefusal } from "./Credentials.js"
import { TOKEN_OPERATION } from "./Faults.js"
import { corruptReceipt } from "./internal/corruptReceipt.js"
import { currentFault } from "./internal/requestContext.js"

const NO_STORE = { "cache-control": "no-store", pragma: "no-cache" }

/** Decodes one form-encoded component (`+` is a space). */
const formDecode = (value: string): string | undefined => {
  try {
    return decodeURIComponent(value.replace(/\+/g, " "))
  } catch {
    return undefined
  }
}

/** Client id and secret from `Authorization: Basic …`, each form-decoded after base64 (RFC 6749 §2.3.1). */
export const basicClientCredentials = (
  header: string | undefined
): Option.Option<{ readonly clientId: string; readonly clientSecret: Redacted.Redacted }> => {
  const match = header === undefined ? null : /^Basic +([A-Za-z0-9+/=]+)\s*$/i.exec(header)
  if (match === null) return Option.none()
  const decoded = Buffer.from(match[1]!, "base64").toString("utf8")
  const colon = decoded.indexOf(":")
  if (colon < 0) return Option.none()
  const clientId = formDecode(decoded.slice(0, colon))
  const clientSecret = formDecode(decoded.slice(colon + 1))
  return clientId === undefined || clientSecret === undefined
    ? Option.none()
    : Option.some({ clientId, clientSecret: Redacted.make(clientSecret) })
}

const refusal = (e: OAuthRefusal) =>
  HttpServerResponse.unsafeJson({ error: e.error, error_description: e.description }, {
    status: e.status,
    headers: e.status === 401 ? { ...NO_STORE, "www-authenticate": "Basic realm=\"reference-bridge\"" } : NO_STORE
  })

/** Builds the token endpoint on the `Credentials` in context. */
export const make: Effect.Effect<
  Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest>,
  never,
  Credentials
> = Effect.gen(function*() {
  const credentials = yield* Credentials
  return Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    if (request.method !== "POST") return HttpServerResponse.empty({ status: 405, headers: { allow: "POST" } })
    if (!/^application\/x-www-form-urlencoded\b/i.test(request.headers["content-type"] ?? "")) {
      return yield* new OAuthRefusal({
        status: 400,
        error: "invalid_request",
        description: "The token request must be application/x-www-form-urlencoded."
      })
    }
    const client = basicClientCredentials(request.headers["authorization"])
    if (Option.isNone(client)) {
      return yield* new OAuthRefusal({
        status: 401,
        error: "invalid_client",
        description: "Client authentication with HTTP Basic is required."
      })
    }
    const form = new URLSearchParams(yield* Effect.orElseSucceed(request.text, () => ""))
    const grantType = form.get("grant_type")
    if (grantType === null) {
      return yield* new OAuthRefusal({ status: 400, error: "invalid_request", description: "grant_type is missing." })
    }
    if (grantType !== "client_credentials") {
      return yield* new OAuthRefusal({
        status: 400,
        error: "unsupported_grant_type",
        description: "Only client_credentials is supported."
      })
    }
    const answer = yield* credentials.grant({ ...client.value, scope: form.get("scope") ?? undefined })
    const fault = yield* currentFault
    const body = Option.isSome(fault) && fault.value._tag === "InvalidReceipt"
      ? corruptReceipt(fault.value.kind, TOKEN_OPERATION, Object.fromEntries(form), answer)
      : answer
    return HttpServerResponse.unsafeJson(body, { headers: NO_STORE })
  }).pipe(
    Effect.catchTag("OAuthRefusal", (e) => Effect.succeed(refusal(e))),
    Effect.withSpan("TokenEndpoint.request")
  )
})
