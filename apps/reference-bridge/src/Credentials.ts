/**
 * The credentials the reference bridge accepts (Authentication rules 2–4):
 * API keys, and OAuth 2.0 client-credentials clients with the access tokens
 * they were granted. Every credential belongs to exactly one tenant.
 */
import { Clock, Context, Data, Effect, Layer, Option, Redacted, Ref } from "effect"
import { randomBytes } from "node:crypto"
import { digest, matchDigest } from "./internal/secret.js"

/** An OAuth 2.0 client-credentials account of a tenant. */
export interface OAuthClientOptions {
  readonly clientId: string
  readonly clientSecret: string | Redacted.Redacted
  /** Space-separated scopes this client may request; a request for any other scope is `invalid_scope`. */
  readonly scope?: string
  /**
   * `expires_in` of the token answer, in seconds, or `"omit"` to leave it
   * out. Default 3600. Values of 30 or less make a client fetch a fresh
   * grant every time (Authentication rule 3).
   */
  readonly expiresIn?: number | "omit"
  /** How long the bridge itself accepts a token, in seconds, when `expiresIn` is `"omit"`. Default 3600. */
  readonly tokenLifetime?: number
}

/** A tenant and the credentials bound to it (Authentication rule 4). */
export interface TenantOptions {
  readonly tenantId: string
  /** An API key: visible ASCII, no spaces or control characters. */
  readonly apiKey?: string | Redacted.Redacted
  /** One or more OAuth client-credentials accounts. */
  readonly oauth?: OAuthClientOptions | ReadonlyArray<OAuthClientOptions>
}

/** Who presented a Bearer credential. */
export type Principal =
  | { readonly kind: "api_key"; readonly tenantId: string }
  | { readonly kind: "oauth"; readonly tenantId: string; readonly clientId: string; readonly grant: number }

/** One access token granted by the token endpoint. */
export interface TokenGrant {
  /** 1 for the first grant of this bridge, then 2, 3, … */
  readonly seq: number
  readonly at: string
  readonly clientId: string
  readonly tenantId: string
  readonly scope?: string
  readonly expiresIn?: number
}

/** The token endpoint's success answer. */
export interface TokenAnswer {
  readonly access_token: string
  readonly token_type: "Bearer"
  readonly expires_in?: number
}

/** A refused token request: the OAuth `error` code and the HTTP status (RFC 6749 §5.2). */
export class OAuthRefusal extends Data.TaggedError("OAuthRefusal")<{
  readonly status: 400 | 401
  readonly error: "invalid_request" | "invalid_client" | "unsupported_grant_type" | "invalid_scope"
  readonly description: string
}> {}

/** Options that cannot work. */
export class InvalidCredentialOptions extends Data.TaggedError("InvalidCredentialOptions")<{
  readonly message: string
}> {}

const VISIBLE_ASCII = /^[\x21-\x7E]+$/
const UNKNOWN_CLIENT = digest("\u0000no such client")

interface Client {
  readonly clientId: string
  /** SHA-256 of the client secret; the secret itself is not kept. */
  readonly secretDigest: Buffer
  readonly tenantId: string
  readonly scopes: ReadonlyArray<string> | undefined
  readonly expiresIn: number | undefined
  readonly lifetimeSeconds: number
}

interface IssuedToken {
  readonly principal: Principal
  readonly expiresAtMs: number
}

const asArray = <A>(value: A | ReadonlyArray<A> | undefined): ReadonlyArray<A> =>
  value === undefined ? [] : Array.isArray(value) ? value : [value as A]

/** The credentials service. */
export class Credentials extends Context.Tag("@crm-relay/reference-bridge/Credentials")<Credentials, {
  /** The principal of a presented Bearer credential (API key or live access token), if any. */
  readonly authenticate: (credential: Redacted.Redacted) => Effect.Effect<Option.Option<Principal>>
  /** Runs the client-credentials grant for an authenticated client id and secret. */
  readonly grant: (request: {
    readonly clientId: string
    readonly clientSecret: Redacted.Redacted
    readonly scope: string | undefined
  }) => Effect.Effect<TokenAnswer, OAuthRefusal>
  /** Every grant so far, oldest first. */
  readonly grants: Effect.Effect<ReadonlyArray<TokenGrant>>
  /** Makes every access token granted so far invalid (the next use answers 401). */
  readonly revokeTokens: Effect.Effect<void>
  /** Forgets all grants and tokens. */
  readonly reset: Effect.Effect<void>
}>() {}

/** Validates the tenants' credentials and builds the service. */
export const make = (tenants: ReadonlyArray<TenantOptions>): Effect.Effect<Credentials["Type"], InvalidCredentialOptions> =>
  Effect.gen(function*() {
    // API keys are kept only as SHA-256 digests.
    const apiKeys: Array<{ readonly digest: Buffer; readonly tenantId: string }> = []
    const clients = new Map<string, Client>()
    const tenantIds = new Set<string>()
    for (const tenant of tenants) {
      if (tenant.tenantId === "") return yield* new InvalidCredentialOptions({ message: "tenantId must not be empty" })
      if (tenantIds.has(tenant.tenantId)) {
        return yield* new InvalidCredentialOptions({ message: `tenant ${tenant.tenantId} is configured twice` })
      }
      tenantIds.add(tenant.tenantId)
      if (tenant.apiKey !== undefined) {
        const key = Redacted.isRedacted(tenant.apiKey) ? Redacted.value(tenant.apiKey) : tenant.apiKey
        if (!VISIBLE_ASCII.test(key)) {
          return yield* new InvalidCredentialOptions({
            message: `the API key of tenant ${tenant.tenantId} must be visible ASCII without spaces`
          })
        }
        if (matchDigest(key, apiKeys.map((k) => k.digest)) >= 0) {
          return yield* new InvalidCredentialOptions({ message: "one API key cannot belong to two tenants" })
        }
        apiKeys.push({ digest: digest(key), tenantId: tenant.tenantId })
      }
      for (const client of asArray(tenant.oauth)) {
        if (client.clientId === "" || clients.has(client.clientId)) {
          return yield* new InvalidCredentialOptions({ message: `OAuth client id ${JSON.stringify(client.clientId)} is empty or taken` })
        }
        const expiresIn = client.expiresIn ?? 3600
        if (expiresIn !== "omit" && !(Number.isFinite(expiresIn) && expiresIn >= 0)) {
          return yield* new InvalidCredentialOptions({ message: `expiresIn of ${client.clientId} must be a number >= 0 or "omit"` })
        }
        const lifetime = expiresIn === "omit" ? client.tokenLifetime ?? 3600 : expiresIn
        clients.set(client.clientId, {
          clientId: client.clientId,
          secretDigest: digest(Redacted.isRedacted(client.clientSecret) ? Redacted.value(client.clientSecret) : client.clientSecret),
          tenantId: tenant.tenantId,
          scopes: client.scope === undefined ? undefined : client.scope.split(" ").filter((s) => s !== ""),
          expiresIn: expiresIn === "omit" ? undefined : expiresIn,
          lifetimeSeconds: lifetime
        })
      }
    }

    const tokens = yield* Ref.make(new Map<string, IssuedToken>())
    const grantLog = yield* Ref.make<ReadonlyArray<TokenGrant>>([])
    const keyDigests = apiKeys.map((k) => k.digest)

    const authenticate = (credential: Redacted.Redacted) =>
      Effect.gen(function*() {
        const presented = Redacted.value(credential)
        const index = matchDigest(presented, keyDigests)
        if (index >= 0) return Option.some<Principal>({ kind: "api_key", tenantId: apiKeys[index]!.tenantId })
        const issued = (yield* Ref.get(tokens)).get(digest(presented).toString("hex"))
        const now = yield* Clock.currentTimeMillis
        return issued !== undefined && issued.expiresAtMs > now ? Option.some(issued.principal) : Option.none()
      })

    const grant = (request: {
      readonly clientId: string
      readonly clientSecret: Redacted.Redacted
      readonly scope: string | undefined
    }) =>
      Effect.gen(function*() {
        const client = clients.get(request.clientId)
        // Compare even for an unknown client id, so timing does not reveal which ids exist.
        const secretOk = matchDigest(Redacted.value(request.clientSecret), [client?.secretDigest ?? UNKNOWN_CLIENT]) === 0
        if (client === undefined || !secretOk) {
          return yield* new OAuthRefusal({ status: 401, error: "invalid_client", description: "Client authentication failed." })
        }
        const requested = request.scope?.split(" ").filter((s) => s !== "") ?? []
        if (requested.some((s) => client.scopes === undefined || !client.scopes.includes(s))) {
          return yield* new OAuthRefusal({ status: 400, error: "invalid_scope", description: "The requested scope is not allowed." })
        }
        const now = yield* Clock.currentTimeMillis
        const accessToken = randomBytes(32).toString("base64url")
        const seq = yield* Ref.modify(grantLog, (log) => {
          const entry: TokenGrant = {
            seq: log.length + 1,
            at: new Date(now).toISOString(),
            clientId: client.clientId,
            tenantId: client.tenantId,
            ...(request.scope === undefined ? {} : { scope: request.scope }),
            ...(client.expiresIn === undefined ? {} : { expiresIn: client.expiresIn })
          }
          return [entry.seq, [...log, entry]]
        })
        yield* Ref.update(tokens, (map) =>
          new Map(map).set(digest(accessToken).toString("hex"), {
            principal: { kind: "oauth", tenantId: client.tenantId, clientId: client.clientId, grant: seq },
            expiresAtMs: now + client.lifetimeSeconds * 1000
          }))
        const answer: TokenAnswer = client.expiresIn === undefined
          ? { access_token: accessToken, token_type: "Bearer" }
          : { access_token: accessToken, token_type: "Bearer", expires_in: client.expiresIn }
        return answer
      })

    return Credentials.of({
      authenticate,
      grant,
      grants: Ref.get(grantLog),
      revokeTokens: Ref.set(tokens, new Map()),
      reset: Effect.zipRight(Ref.set(tokens, new Map()), Ref.set(grantLog, []))
    })
  })

/** The credentials service for `tenants`. */
export const layer = (tenants: ReadonlyArray<TenantOptions>): Layer.Layer<Credentials, InvalidCredentialOptions> =>
  Layer.effect(Credentials, make(tenants))
