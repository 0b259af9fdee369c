/**
 * A delivery's receiver origin (scheme, host and port of its target URL,
 * lower-cased; "" when the URL does not parse): the fairness key of the
 * deliveries table, its generated `target_origin` column (store migration
 * 0008), written once here for the code that needs it before or beside a row.
 */

/** The POSIX regular expression of the origin, as the generated column's `substring(target_url FROM …)` reads it. */
export const ORIGIN_PATTERN = "^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*"

const ORIGIN = new RegExp(ORIGIN_PATTERN)

/** The origin of `targetUrl`, as the generated `target_origin` column computes it. */
export const originOf = (targetUrl: string): string => ORIGIN.exec(targetUrl)?.[0].toLowerCase() ?? ""
