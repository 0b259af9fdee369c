/**
 * Row ids are PostgreSQL `uuid` columns, and PostgreSQL answers a comparison
 * of a uuid with text that is not one with an error, not with "no rows". A
 * lookup by an id that came from outside checks it here first and answers
 * "not found" without asking the database.
 */
import { Schema } from "effect"

/** Whether `value` has the shape of a uuid row id. */
export const isUuid = Schema.is(Schema.UUID)
