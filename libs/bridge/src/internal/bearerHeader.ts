/**
 * The `Authorization: Bearer …` header value of a credential, kept Redacted.
 * One transport sees the same credential on almost every call (an API key, a
 * cached token), so the last header is reused instead of rebuilt.
 */
import { Redacted } from "effect"

/** A function from a Bearer credential to its Redacted header value, remembering the last one. */
export const bearerHeader = (): (bearer: Redacted.Redacted<string>) => Redacted.Redacted<string> => {
  let lastBearer: Redacted.Redacted<string> | undefined
  let lastHeader: Redacted.Redacted<string> | undefined
  return (bearer) => {
    if (bearer !== lastBearer || lastHeader === undefined) {
      lastBearer = bearer
      lastHeader = Redacted.make(`Bearer ${Redacted.value(bearer)}`)
    }
    return lastHeader
  }
}
