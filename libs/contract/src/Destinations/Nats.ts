/**
 * A NATS JetStream destination's settings: where to connect and the subject
 * each event is published on (a stream must capture it). Subjects the broker
 * would reject for publishing are refused here, before anything is stored.
 */
import { Schema } from "effect"

/** A NATS URL: `tls://host[:port]`, or `nats://` for a development server on an allowed private address. */
export const NatsUrl = Schema.String.pipe(
  Schema.filter((text) => {
    const url = URL.parse(text)
    if (url === null || (url.protocol !== "tls:" && url.protocol !== "nats:") || url.hostname === "") {
      return "must be a tls:// URL (nats:// only for a private address EGRESS_ALLOW_PRIVATE allows)"
    }
    if (url.username !== "" || url.password !== "") return "must not carry credentials; they are given separately and sealed"
    if ((url.pathname !== "" && url.pathname !== "/") || url.search !== "" || url.hash !== "") {
      return "must be only a scheme, a host and a port"
    }
    return true
  }),
  Schema.brand("NatsUrl")
).annotations({ identifier: "NatsUrl", description: "tls://host[:port]; nats:// only on an allowed private address." })
export type NatsUrl = typeof NatsUrl.Type

/** Why `subject` cannot be published to, or `undefined` when it can. */
export const subjectProblem = (subject: string): string | undefined => {
  if (subject.length === 0 || subject.length > 255) return "must be 1 to 255 characters"
  const tokens = subject.split(".")
  if (tokens.some((token) => token.length === 0)) return "must be dot-separated tokens, none empty"
  if (tokens.some((token) => /[\s\u0000]/.test(token))) return "must not contain spaces or control characters"
  if (tokens.some((token) => token.includes("*") || token.includes(">"))) return "must not contain the wildcards '*' or '>' (a published subject is literal)"
  // `$JS.API.…`, `$SYS.…` are the server's own APIs: publishing events there is never meant.
  if (subject.startsWith("$")) return "must not start with '$' (reserved for the server's own subjects)"
  return undefined
}

/** A subject events are published on: literal dot-separated tokens, no spaces or wildcards. */
export const Subject = Schema.String.pipe(
  Schema.filter((subject) => subjectProblem(subject) ?? true),
  Schema.brand("NatsSubject")
).annotations({ identifier: "NatsSubject", description: "Dot-separated tokens without spaces or wildcards, e.g. crm.leads." })
export type Subject = typeof Subject.Type

/** A JetStream stream name: no spaces, '.', '*', '>', '/' or '\\'. */
export const StreamName = Schema.String.pipe(
  Schema.filter((name) => /^[^\s.*>/\\]{1,255}$/.test(name) || "must be 1 to 255 characters without spaces, '.', '*', '>', '/' or '\\'"),
  Schema.brand("NatsStream")
).annotations({ identifier: "NatsStream", description: "The stream that must capture the subject, e.g. CRM." })
export type StreamName = typeof StreamName.Type

/** Where a NATS JetStream destination publishes; `stream`, when given, must be the stream capturing the subject. */
export class NatsConfig extends Schema.Class<NatsConfig>("NatsConfig")({
  url: NatsUrl,
  subject: Subject,
  stream: Schema.optionalWith(StreamName, { exact: true })
}) {}

/** How the server authenticates the publisher; sealed in the Vault, never shown again. */
export const NatsCredentials = Schema.Union(
  Schema.TaggedStruct("UserPassword", { user: Schema.NonEmptyString, password: Schema.Redacted(Schema.String) }),
  Schema.TaggedStruct("Token", { token: Schema.Redacted(Schema.NonEmptyString) })
).annotations({ identifier: "NatsCredentials" })
export type NatsCredentials = typeof NatsCredentials.Type
