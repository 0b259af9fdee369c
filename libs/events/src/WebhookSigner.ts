/**
 * Standard Webhooks signatures (https://www.standardwebhooks.com): every
 * delivery carries `webhook-id` (the delivery id, the same on every retry so
 * receivers drop duplicates), `webhook-timestamp` (unix seconds of this
 * attempt) and `webhook-signature`: `v1,` + base64 of HMAC-SHA256 over
 * `${id}.${timestamp}.${body}`, keyed by the base64-decoded part of the
 * account's `whsec_` secret. The body signed is the exact bytes sent.
 * During a secret rotation's overlap the header carries one signature per
 * secret, space-separated (current first), as Standard Webhooks allows: a
 * receiver holding either secret verifies the delivery.
 */
import { Data, Either, Redacted } from "effect"
import { createHmac, createSecretKey, type KeyObject } from "node:crypto"
import { SECRET_PREFIX } from "./SigningSecrets.js"

/** The User-Agent of webhook deliveries. */
export const USER_AGENT = "crm-relay-webhooks/1"

/** The secret is not a `whsec_` + base64 Standard Webhooks secret. */
export class InvalidSigningSecret extends Data.TaggedError("InvalidSigningSecret")<{}> {
  override get message(): string {
    return "The signing secret is not a whsec_ Standard Webhooks secret."
  }
}

/** An HMAC key ready to sign: the decoded secret as an opaque KeyObject (prints nothing), imported once. */
export interface SigningKey {
  readonly key: KeyObject
}

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/

/** The signing key of a `whsec_…` secret. */
export const signingKey = (secret: Redacted.Redacted<string>): Either.Either<SigningKey, InvalidSigningSecret> => {
  const text = Redacted.value(secret)
  const encoded = text.startsWith(SECRET_PREFIX) ? text.slice(SECRET_PREFIX.length) : ""
  if (!BASE64.test(encoded)) return Either.left(new InvalidSigningSecret())
  const bytes = Buffer.from(encoded, "base64")
  return bytes.length === 0 ? Either.left(new InvalidSigningSecret()) : Either.right({ key: createSecretKey(bytes) })
}

/** `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`. */
export const signature = (key: SigningKey, id: string, timestamp: number, body: string): string =>
  `v1,${createHmac("sha256", key.key).update(`${id}.${timestamp}.${body}`, "utf8").digest("base64")}`

/** The headers of one delivery attempt of `body` (JSON), signed with `key` (and `previous`, during an overlap). */
export const headers = (options: {
  readonly key: SigningKey
  readonly previous?: SigningKey | undefined
  readonly id: string
  /** Unix seconds of this attempt. */
  readonly timestamp: number
  readonly body: string
}): Record<string, string> => ({
  "content-type": "application/json",
  "user-agent": USER_AGENT,
  "webhook-id": options.id,
  "webhook-timestamp": String(options.timestamp),
  "webhook-signature": options.previous === undefined
    ? signature(options.key, options.id, options.timestamp, options.body)
    : `${signature(options.key, options.id, options.timestamp, options.body)} ${signature(options.previous, options.id, options.timestamp, options.body)}`
})
