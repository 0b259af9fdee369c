/**
 * Cursor pages of the operator's listings: a page is `limit` rows in a stable
 * order (insertion order, `seq`), and the cursor of the next page is the id
 * of the last row shown, so rows added meanwhile never shift a page.
 */
import { clampLimit, DEFAULT_PAGE, MAX_PAGE } from "@crm-relay/contract/Pages"
import { Data, Effect, Option } from "effect"

/** Page sizes of the listings, and `limit` clamped to them (the contract's). */
export { clampLimit, DEFAULT_PAGE, MAX_PAGE }

/** A page of rows and the cursor of the next one (none on the last page). */
export interface Page<A> {
  readonly items: ReadonlyArray<A>
  readonly nextCursor: Option.Option<string>
}

/** The cursor is not a row of the listing. */
export class UnknownCursor extends Data.TaggedError("UnknownCursor")<{ readonly cursor: string }> {}


/**
 * Reads one page with `fetch(after, limit + 1)` (the extra row tells whether
 * another page follows); a given cursor must be known to `known`.
 */
export const pageOf = <A extends { readonly id: string }, R>(
  options: { readonly limit?: number | undefined; readonly cursor?: string | undefined },
  fetch: (after: string | null, limit: number) => Effect.Effect<ReadonlyArray<A>, never, R>,
  known: (cursor: string) => Effect.Effect<boolean, never, R>
): Effect.Effect<Page<A>, UnknownCursor, R> =>
  Effect.gen(function*() {
    const limit = clampLimit(options.limit)
    const cursor = options.cursor
    if (cursor !== undefined && !(yield* known(cursor))) return yield* new UnknownCursor({ cursor })
    const rows = yield* fetch(cursor ?? null, limit + 1)
    const items = rows.slice(0, limit)
    return { items, nextCursor: rows.length > limit ? Option.some(items[items.length - 1]!.id) : Option.none() }
  })
