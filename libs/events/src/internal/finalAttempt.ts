/**
 * The attempt that finished a delivery, held on its row (store migration
 * 0022) rather than as a `delivery_attempts` row: the common delivery, one
 * attempt and delivered, then writes no attempt row at all. Readers take
 * the logged attempts, then the row's; a replay moves the row's into the
 * log (JobQueue's `FinalAttempt`), so the log keeps every run in order.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { JobQueue } from "@crm-relay/store"

/**
 * The held attempt's result, over a row of `deliveries`: the delivery's status. A row pending again
 * still holding one was replayed by a replica of the release before 0022 (which does not move it);
 * its result is then read from the attempt (no error class: delivered).
 */
const resultSql = `CASE WHEN status = 'pending' THEN CASE WHEN final_error_class IS NULL THEN 'delivered' ELSE 'failed' END
  ELSE status END`

/** The columns of `deliveries` holding its final attempt, as the `deliveries` queue table declares them. */
export const finalAttempt: JobQueue.FinalAttempt = {
  present: "final_attempt",
  log: {
    delivery_id: "id",
    attempt: "final_attempt",
    started_at: "final_started_at",
    status_code: "final_status_code",
    duration_ms: "final_duration_ms",
    error_class: "final_error_class",
    error: "final_error",
    result: resultSql
  },
  columns: ["final_attempt", "final_started_at", "final_status_code", "final_duration_ms", "final_error_class", "final_error"]
}

/** Every attempt of the delivery `id`, oldest first: the logged ones in the order they were written, then the one its row holds. */
export const attemptsOf = (sql: SqlClient.SqlClient, id: string) =>
  sql`SELECT attempt, started_at, status_code, duration_ms, error_class, error, result FROM (
      SELECT id AS seq, attempt, started_at, status_code, duration_ms, error_class, error, result
      FROM delivery_attempts WHERE delivery_id = ${id}
      UNION ALL
      SELECT NULL, final_attempt, final_started_at, final_status_code, final_duration_ms, final_error_class, final_error,
        ${sql.literal(resultSql)}
      FROM deliveries WHERE id = ${id} AND final_attempt IS NOT NULL
    ) AS a ORDER BY seq NULLS LAST`

/**
 * The listing's latest attempt of a delivery `d`: the one its row holds, else the latest logged one
 * (looked up only when the row holds none). `lastAttemptJoin` goes in the FROM clause, `lastAttemptColumns` in the select list.
 */
export const lastAttemptJoin = `LEFT JOIN LATERAL (
        SELECT started_at, status_code, error_class, duration_ms FROM delivery_attempts
        WHERE d.final_attempt IS NULL AND delivery_id = d.id ORDER BY id DESC LIMIT 1
      ) AS a ON true`

/** See `lastAttemptJoin`. */
export const lastAttemptColumns = `CASE WHEN d.final_attempt IS NULL THEN a.started_at ELSE d.final_started_at END AS last_attempt_at,
      CASE WHEN d.final_attempt IS NULL THEN a.status_code ELSE d.final_status_code END AS last_status_code,
      CASE WHEN d.final_attempt IS NULL THEN a.error_class ELSE d.final_error_class END AS last_error_class,
      CASE WHEN d.final_attempt IS NULL THEN a.duration_ms ELSE d.final_duration_ms END AS last_duration_ms`
