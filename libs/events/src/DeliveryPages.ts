/**
 * Page sizes of the deliveries listing, in a module of their own so the
 * CLI can describe its `--limit` without loading the delivery store.
 */

/** Default page size of the listing. */
export const DEFAULT_PAGE = 50

/** Largest page size of the listing. */
export const MAX_PAGE = 200
