/**
 * Page sizes of the operator's listings (a module the CLI can load without
 * any store, to describe its `--limit`).
 */

/** Default page size of a listing. */
export const DEFAULT_PAGE = 50

/** Largest page size of a listing. */
export const MAX_PAGE = 200

/** `limit` clamped to 1..MAX_PAGE (DEFAULT_PAGE when not given). */
export const clampLimit = (limit: number | undefined): number =>
  Math.min(MAX_PAGE, Math.max(1, Math.trunc(limit ?? DEFAULT_PAGE)))
