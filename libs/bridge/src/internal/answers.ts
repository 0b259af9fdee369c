/**
 * What an HTTP answer means before its body is read (contract "Errors"):
 * 2xx is a receipt candidate, 409 Conflict, 401 Auth, 429 and 5xx Transient,
 * redirects and other statuses Permanent. Also the body checks every
 * transport shares: no content encoding, JSON that parses.
 */
import { type Duration, Effect, Either, Option } from "effect"
import type { Operations } from "@crm-relay/contract"
import type { BridgeError } from "../BridgeError.js"
import { Auth, Conflict, Permanent, transient } from "../BridgeError.js"
import { redirectDiagnosis } from "./diagnose.js"
import { parseRetryAfter } from "./retryAfter.js"

/** The parts of an answer these checks read; header names are lower-case. */
export interface Answer {
  readonly status: number
  readonly headers: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
  readonly body: Uint8Array
}

/** A header's value; repeated headers are joined with ", " as HTTP allows. */
export const header = (answer: Pick<Answer, "headers">, name: string): string | undefined => {
  const value = answer.headers[name]
  return value === undefined ? undefined : typeof value === "string" ? value : value.join(", ")
}

const noFailure: Effect.Effect<Option.Option<BridgeError>> = Effect.succeed(Option.none())

/**
 * The failure an error status stands for (contract "Errors": 409 Conflict,
 * 401 Auth, 429 and 5xx Transient, anything else Permanent). `via` says how
 * the status came when not as the HTTP status (" in a tool error"); `retryAfter` is already read.
 */
export const statusError = (
  operation: Operations.OperationName,
  status: number,
  peer: string,
  via: string,
  retryAfter: Duration.Duration | undefined
): BridgeError => {
  const who = capitalize(peer)
  if (status === 409) {
    return new Conflict({ operation, status, message: `${who} answered 409${via}: the slot is taken or the write conflicts.` })
  }
  if (status === 401) return new Auth({ operation, status, message: `${who} refused the credential (401${via}).` })
  if (status === 429 || (status >= 500 && status <= 599)) {
    return transient({ operation, status, message: `${who} answered ${status}${via}; the exchange may be retried later.`, retryAfter })
  }
  if (status >= 300 && status <= 399) {
    const { diagnosis, message } = redirectDiagnosis(status, peer)
    return new Permanent({ operation, status, kind: "redirect", message, diagnosis })
  }
  return new Permanent({ operation, status, kind: "rejected", message: `${who} rejected the request with ${status}${via}.` })
}

/**
 * The failure a non-2xx status stands for, or none for 2xx. `peer` names who
 * answered ("the bridge", "the token endpoint") in the message.
 */
export const statusFailure = (
  operation: Operations.OperationName,
  answer: Pick<Answer, "status" | "headers">,
  peer: string
): Effect.Effect<Option.Option<BridgeError>> =>
  answer.status >= 200 && answer.status <= 299 ? noFailure : Effect.clockWith((clock) =>
    Effect.sync(() =>
      Option.some(statusError(
        operation,
        answer.status,
        peer,
        "",
        Option.getOrUndefined(parseRetryAfter(header(answer, "retry-after"), clock.unsafeCurrentTimeMillis()))
      ))
    )
  )

const capitalize = (s: string): string => s.charAt(0).toUpperCase() + s.slice(1)

/** Refuses a compressed answer: only uncompressed bodies are accepted (Transport rules). */
export const checkIdentityEncoding = (
  operation: Operations.OperationName,
  answer: Pick<Answer, "status" | "headers">,
  peer: string
): Either.Either<void, Permanent> => {
  const encoding = header(answer, "content-encoding")?.trim().toLowerCase()
  return encoding === undefined || encoding === "" || encoding === "identity"
    ? Either.void
    : Either.left(
      new Permanent({
        operation,
        status: answer.status,
        kind: "encoding",
        message: `${capitalize(peer)} sent a compressed answer, but only uncompressed answers are accepted.`
      })
    )
}

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false })

/** The body as UTF-8 text; invalid UTF-8 is malformed. */
export const bodyText = (
  operation: Operations.OperationName,
  answer: Pick<Answer, "status" | "body">,
  peer: string
): Either.Either<string, Permanent> =>
  Either.try({
    try: () => utf8.decode(answer.body),
    catch: () =>
      new Permanent({
        operation,
        status: answer.status,
        kind: "malformed_json",
        message: `${capitalize(peer)}'s answer is not valid UTF-8 text.`
      })
  })

/** Parses JSON text; an empty body or anything that is not JSON is malformed, never success. */
export const parseJson = (
  operation: Operations.OperationName,
  status: number,
  text: string,
  peer: string
): Either.Either<unknown, Permanent> =>
  text.trim() === ""
    ? Either.left(
      new Permanent({ operation, status, kind: "malformed_json", message: `${capitalize(peer)} answered ${status} with an empty body, which is not a receipt.` })
    )
    : Either.try({
      try: (): unknown => JSON.parse(text),
      catch: () =>
        new Permanent({ operation, status, kind: "malformed_json", message: `${capitalize(peer)}'s answer is not valid JSON.` })
    })

/** Status, encoding and JSON checks in order: the parsed JSON of a 2xx answer. */
export const jsonAnswer = (
  operation: Operations.OperationName,
  answer: Answer,
  peer: string
): Effect.Effect<unknown, BridgeError> =>
  Effect.flatMap(statusFailure(operation, answer, peer), (failure) =>
    Option.isSome(failure)
      ? Effect.fail(failure.value)
      : Either.flatMap(checkIdentityEncoding(operation, answer, peer), () =>
        Either.flatMap(bodyText(operation, answer, peer), (text) => parseJson(operation, answer.status, text, peer))))
