/**
 * Input validation that runs before anything is sent, with readable,
 * typed refusals.
 */
import { Effect, ParseResult, Schema } from "effect"
import { Appointment } from "./Resources.js"

/**
 * One readable sentence for a schema refusal: the first issue with its path,
 * e.g. `appointment.end: end must be after start`.
 */
export const describeParseError = (error: ParseResult.ParseError): string => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  const first = issues[0]
  if (first === undefined) return "the value is invalid"
  const path = first.path.map(String).join(".")
  const more = issues.length > 1 ? ` (and ${issues.length - 1} more)` : ""
  return `${path === "" ? "" : `${path}: `}${first.message}${more}`
}

/** A value refused by its Schema before anything was sent. */
export class InvalidInput extends Schema.TaggedError<InvalidInput>()("InvalidInput", {
  what: Schema.String,
  message: Schema.String
}) {}

/** Decodes `input` with `schema`, refusing with {@link InvalidInput} naming `what`. */
export const validate = <A, I>(schema: Schema.Schema<A, I>, what: string) => {
  const decode = Schema.decodeUnknown(schema, { errors: "all" })
  return (input: unknown): Effect.Effect<A, InvalidInput> =>
    decode(input).pipe(
      Effect.mapError((error) => new InvalidInput({ what, message: `${what} refused: ${describeParseError(error)}` }))
    )
}

/**
 * Operation rule 7: appointment input is validated before sending — a
 * timestamp without an offset, or an end that is not after the start, is
 * refused with {@link InvalidInput} and not sent.
 */
export const validateAppointment: (input: unknown) => Effect.Effect<Appointment, InvalidInput> = validate(
  Appointment,
  "appointment"
)
