/**
 * OAuth 2.0 client-credentials (Authentication rule 3): a form POST to the
 * HTTPS token URL through the same safe egress, the access token sent as a
 * Bearer credential, cached by TokenCache, and on a bridge 401 exactly one
 * fresh grant and one replay — a second 401 stops with Auth.
 */
import { createHash } from "node:crypto"
import { Effect, Either, Layer, Redacted, Schema } from "effect"
import { OAuth } from "@crm-relay/contract"
import type { Operations } from "@crm-relay/contract"
import type { BridgeError } from "./BridgeError.js"
import { Permanent } from "./BridgeError.js"
import { Credentials } from "./Credentials.js"
import { Egress } from "./Egress.js"
import { InvalidConnection } from "./InvalidConnection.js"
import type { Grant } from "./TokenCache.js"
import { TokenCache } from "./TokenCache.js"
import { jsonAnswer } from "./internal/answers.js"
import { send } from "./internal/send.js"
import { checkEndpointUrl } from "./internal/urls.js"

/** The OAuth settings of one connection, and what its cached tokens are bound to. */
export interface OAuthSettings {
  readonly tokenUrl: string
  readonly clientId: string
  readonly clientSecret: Redacted.Redacted<string>
  /** Sent only when configured. */
  readonly scope?: string | undefined
  /** Tenant, account, endpoint and configuration the cached token is bound to. */
  readonly binding: {
    readonly tenantId: string
    readonly accountId: string
    /** The bridge endpoint (transport kind and URL). */
    readonly endpoint: string
    /** The connection's configuration version. */
    readonly configuration: string
  }
}

const CONTROL = /[\x00-\x1F\x7F]/
/** RFC 6749 §3.3: scope tokens of visible ASCII except `"` and `\`, separated by single spaces. */
const SCOPE = /^[\x21\x23-\x5B\x5D-\x7E]+(?: [\x21\x23-\x5B\x5D-\x7E]+)*$/

/**
 * application/x-www-form-urlencoded encoding of one value (RFC 6749 §2.3.1,
 * Appendix B): everything but alphanumerics and `*-._` is percent-encoded,
 * space becomes `+`.
 */
export const formEncode = (value: string): string =>
  encodeURIComponent(value)
    .replace(/[!'()~]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
    .replace(/%20/g, "+")

/** `Basic base64(formEncode(id) ":" formEncode(secret))`. */
export const basicAuthorization = (clientId: string, clientSecret: Redacted.Redacted<string>): Redacted.Redacted<string> =>
  Redacted.make(
    `Basic ${Buffer.from(`${formEncode(clientId)}:${formEncode(Redacted.value(clientSecret))}`, "utf8").toString("base64")}`
  )

/** The form body: grant_type, and scope only when configured. */
export const grantBody = (scope: string | undefined): string =>
  scope === undefined ? "grant_type=client_credentials" : `grant_type=client_credentials&scope=${formEncode(scope)}`

/**
 * The token cache key: SHA-256 of tenant, account, endpoint, configuration,
 * token URL, client id, scope and a SHA-256 of the secret — the secret itself
 * is never part of any key or log.
 */
export const cacheKey = (settings: OAuthSettings): string => {
  const secretDigest = createHash("sha256").update(Redacted.value(settings.clientSecret), "utf8").digest("hex")
  return createHash("sha256").update(
    JSON.stringify([
      "crm-relay/oauth-token/v1",
      settings.binding.tenantId,
      settings.binding.accountId,
      settings.binding.endpoint,
      settings.binding.configuration,
      settings.tokenUrl,
      settings.clientId,
      settings.scope ?? null,
      secretDigest
    ]),
    "utf8"
  ).digest("hex")
}

const refuse = (field: string, message: string) => Either.left(new InvalidConnection({ field, message }))

/** The settings when usable; refused at configuration time otherwise (secrets never appear in messages). */
export const validateSettings = (settings: OAuthSettings): Either.Either<OAuthSettings, InvalidConnection> => {
  const url = checkEndpointUrl("auth.token_url", "token URL", settings.tokenUrl)
  if (Either.isLeft(url)) return Either.left(url.left)
  if (settings.clientId === "" || CONTROL.test(settings.clientId)) {
    return refuse("auth.client_id", "The client ID must be non-empty, without control characters.")
  }
  const secret = Redacted.value(settings.clientSecret)
  if (secret === "" || CONTROL.test(secret)) {
    return refuse("auth.client_secret", "The client secret must be non-empty, without control characters.")
  }
  if (settings.scope !== undefined && !SCOPE.test(settings.scope)) {
    return refuse("auth.scope", "The scope must be space-separated tokens of visible ASCII characters.")
  }
  return Either.right(settings)
}

const decodeToken = Schema.decodeUnknown(OAuth.TokenResponse)
const encoder = new TextEncoder()

/** Credentials from an OAuth client-credentials grant; the token endpoint goes through Egress too. */
export const layer = (settings: OAuthSettings): Layer.Layer<Credentials, InvalidConnection, Egress | TokenCache> =>
  Layer.effect(
    Credentials,
    Effect.gen(function*() {
      const valid = yield* validateSettings(settings)
      const cache = yield* TokenCache
      const egress = yield* Egress
      const key = cacheKey(valid)
      const url = (yield* checkEndpointUrl("auth.token_url", "token URL", valid.tokenUrl)).href
      const authorization = basicAuthorization(valid.clientId, valid.clientSecret)
      const body = encoder.encode(grantBody(valid.scope))

      // Token endpoint failures are classified like bridge answers, for the operation they serve.
      const grant = (operation: Operations.OperationName): Effect.Effect<Grant, BridgeError> =>
        send(egress, operation, {
          url,
          headers: {
            "authorization": authorization,
            "content-type": "application/x-www-form-urlencoded",
            "accept": "application/json"
          },
          body,
          purpose: "oauth_token"
        }, "the token endpoint").pipe(
          Effect.flatMap((answer) =>
            jsonAnswer(operation, answer, "the token endpoint").pipe(
              Effect.flatMap((json) =>
                Effect.mapError(
                  decodeToken(json),
                  () =>
                    new Permanent({
                      operation,
                      status: answer.status,
                      kind: "invalid_receipt",
                      message: "The token endpoint's answer is not a valid Bearer token response."
                    })
                )
              )
            )
          ),
          Effect.map((token): Grant => ({
            token: Redacted.make(token.access_token),
            cacheSeconds: OAuth.tokenCacheSeconds(token.expires_in)
          })),
          Effect.withSpan("OAuthCredentials.grant")
        )

      return Credentials.of({
        kind: "oauth",
        authorize: (operation, sendWith) =>
          Effect.flatMap(cache.get(key, grant(operation)), (token) =>
            Effect.catchTag(sendWith(token), "Auth", () =>
              Effect.flatMap(cache.renew(key, token, grant(operation)), sendWith)))
      })
    })
  )
