/**
 * The shape of one migration: plain SQL statements, run in order inside the
 * migration's own transaction. Plain SQL keeps migrations identical on
 * PostgreSQL and PGlite, reviewable, and hashable (test databases cache a
 * migrated template keyed by the SQL text).
 */

/** One forward-only migration. */
export interface Migration {
  /** Statements, one per entry (no trailing semicolons needed). */
  readonly statements: ReadonlyArray<string>
}

/** Declares a migration. */
export const make = (statements: ReadonlyArray<string>): Migration => ({ statements })
