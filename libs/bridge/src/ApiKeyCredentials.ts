/**
 * API-key credentials (Authentication rule 2): `Authorization: Bearer <key>`
 * on every request. A 401 is final — it is never replayed; the key needs
 * correcting.
 */
import { Effect, Either, Layer, Redacted } from "effect"
import { Credentials } from "./Credentials.js"
import { InvalidConnection } from "./InvalidConnection.js"

/** An API key is visible ASCII: no spaces, no control characters. */
const VISIBLE_ASCII = /^[\x21-\x7E]+$/
/** Longer keys would make oversized headers; no real key is this long. */
const MAX_KEY_LENGTH = 4096

/** The key when it is usable; refused at configuration time otherwise (the key never appears in the message). */
export const validateKey = (key: Redacted.Redacted<string>): Either.Either<Redacted.Redacted<string>, InvalidConnection> => {
  const text = Redacted.value(key)
  if (text.length === 0) return Either.left(new InvalidConnection({ field: "auth.key", message: "The API key must not be empty." }))
  if (text.length > MAX_KEY_LENGTH) {
    return Either.left(new InvalidConnection({ field: "auth.key", message: `The API key must be at most ${MAX_KEY_LENGTH} characters.` }))
  }
  return VISIBLE_ASCII.test(text)
    ? Either.right(key)
    : Either.left(
      new InvalidConnection({
        field: "auth.key",
        message: "The API key must consist of visible ASCII characters, with no spaces or control characters."
      })
    )
}

/** Credentials that present `key` as a Bearer credential and never replay a 401. */
export const layer = (key: Redacted.Redacted<string>): Layer.Layer<Credentials, InvalidConnection> =>
  Layer.effect(
    Credentials,
    Effect.map(validateKey(key), (valid) =>
      Credentials.of({
        kind: "api_key",
        authorize: (_operation, send) => send(valid)
      }))
  )
