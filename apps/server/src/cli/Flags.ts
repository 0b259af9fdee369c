/**
 * Options several commands share: the page of a listing (`--limit`,
 * `--cursor`) and comma-separated statuses (`--status failed,pending`, the
 * same form the internal API takes).
 */
import { Options } from "@effect/cli"
import * as Page from "@crm-relay/contract/Pages"
import { Effect, Option } from "effect"
import { type AdminError, refused } from "./AdminError.js"
import type { PageRequest } from "./AdminOperations.js"

/** `--limit`: the page size. */
export const limit = Options.integer("limit").pipe(
  Options.withDefault(Page.DEFAULT_PAGE),
  Options.withDescription(`At most this many per page (1 to ${Page.MAX_PAGE}).`)
)

/** `--cursor`: where the previous page ended. */
export const cursor = Options.text("cursor").pipe(
  Options.optional,
  Options.withDescription("Continue after this item: the next_cursor the previous page printed.")
)

/** The page the flags ask for (`--limit` clamped to its range). */
export const pageRequest = (flags: { readonly limit: number; readonly cursor: Option.Option<string> }): PageRequest => ({
  limit: Page.clampLimit(flags.limit),
  cursor: flags.cursor
})

/** `--status`: comma-separated values of `allowed` (repeatable: the values of every occurrence count). */
export const status = (allowed: ReadonlyArray<string>, description: string) =>
  Options.text("status").pipe(Options.repeated, Options.withDescription(`${description} One or more of ${allowed.join(", ")}, comma-separated.`))

/** The statuses of `--status` (or `fallback` when not given), refusing unknown ones. */
export const statuses = <S extends string>(
  given: ReadonlyArray<string>,
  allowed: ReadonlyArray<S>,
  fallback: ReadonlyArray<S>
): Effect.Effect<ReadonlyArray<S>, AdminError> => {
  const values = given.flatMap((text) => text.split(",")).map((s) => s.trim()).filter((s) => s !== "")
  if (values.length === 0) return Effect.succeed(fallback)
  const isAllowed = (value: string): value is S => (allowed as ReadonlyArray<string>).includes(value)
  const valid = values.filter(isAllowed)
  const unknown = values.find((value) => !isAllowed(value))
  return unknown === undefined
    ? Effect.succeed(Array.from(new Set(valid)))
    : Effect.fail(refused(`--status: ${JSON.stringify(unknown)} is not a status; use ${allowed.join(", ")} (comma-separated).`))
}

/** The line that shows how to get the next page, if there is one. */
export const moreLine = (nextCursor: string | null, command: string): ReadonlyArray<string> =>
  Option.match(Option.fromNullable(nextCursor), { onNone: () => [], onSome: (next) => [`More: ${command} --cursor ${next}`] })
