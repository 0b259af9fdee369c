/**
 * Configuration-time checks of the URLs of a connection (Transport rules):
 * HTTPS, no credentials, no query string and no fragment. Safe egress checks
 * again at send time; this only refuses early, with a clear reason.
 */
import { Either } from "effect"
import { InvalidConnection } from "../InvalidConnection.js"

/**
 * The URL when `text` is an acceptable HTTPS endpoint URL; `field` is the
 * connection-form field (`url`, `auth.token_url`), `label` names it in the message.
 */
export const checkEndpointUrl = (
  field: string,
  label: string,
  text: string
): Either.Either<URL, InvalidConnection> => {
  const refuse = (why: string) => Either.left(new InvalidConnection({ field, message: `The ${label} ${why}.` }))
  if (!URL.canParse(text)) return refuse("is not a URL")
  const url = new URL(text)
  if (url.protocol !== "https:") return refuse("must use https")
  if (url.username !== "" || url.password !== "") return refuse("must not carry credentials; enter them in the connection form")
  if (url.search !== "" || text.includes("?")) return refuse("must not have a query string")
  if (url.hash !== "" || text.includes("#")) return refuse("must not have a fragment")
  return Either.right(url)
}
