/**
 * The Event API's per-request statements as PL/pgSQL functions.
 *
 * Every Event API request runs the same statements (the key by its hash, the
 * rate-limit count, and for GET /perform-list the preview). Sent as SQL, the
 * driver's unnamed statements are parsed and planned again on every call: for
 * the combined GET /perform-list statement, planning cost PostgreSQL about as
 * much CPU as running it. PL/pgSQL plans a function's statements once per
 * session and keeps the plans, so the statement a request sends is only a
 * function call. The rules are unchanged; they now live here, once:
 *
 * - `rate_limit_hit`: the fixed-window count of one request of a subject
 *   (one atomic upsert, so concurrent counts are exact); a window start older
 *   than the stored one (a replica whose clock lags) counts into the newest.
 *   The caller computes the window start from its own clock.
 * - `integration_key_authorize`: the active key with this SHA-256 and the
 *   request counted under `subject_prefix || key id`; no row (and nothing
 *   counted) for an unknown or disabled key. The server still compares the
 *   returned digest in constant time.
 * - `preview_latest`: the perform-list preview of an account as one JSON
 *   array: its latest `limit` deliveries that are not tests, one per event
 *   (a fan-out's duplicates share call, event and creation time; the last one
 *   inserted stands for them), newest first.
 *
 * Table and column references are qualified: in PL/pgSQL an unqualified name
 * that is also an output column would be ambiguous.
 */
import * as Migration from "../Migration.js"

export default Migration.make([
  `CREATE FUNCTION rate_limit_hit(p_subject text, p_window_start timestamptz)
  RETURNS TABLE (count integer, window_start timestamptz)
  LANGUAGE plpgsql AS $body$
  BEGIN
    RETURN QUERY
      INSERT INTO rate_limits AS r (subject, window_start, count) VALUES (p_subject, p_window_start, 1)
      ON CONFLICT (subject) DO UPDATE SET
        count = CASE WHEN EXCLUDED.window_start > r.window_start THEN 1 ELSE r.count + 1 END,
        window_start = GREATEST(r.window_start, EXCLUDED.window_start)
      RETURNING r.count, r.window_start;
  END
  $body$`,

  `CREATE FUNCTION integration_key_authorize(p_secret_hash bytea, p_subject_prefix text, p_window_start timestamptz)
  RETURNS TABLE (id uuid, account_id uuid, secret_hash bytea, last_used_at timestamptz, count integer, window_start timestamptz)
  LANGUAGE plpgsql AS $body$
  DECLARE
    k record;
  BEGIN
    SELECT i.id, i.account_id, i.secret_hash, i.last_used_at INTO k
      FROM integration_keys AS i
      WHERE i.secret_hash = p_secret_hash AND i.disabled_at IS NULL;
    IF NOT FOUND THEN
      RETURN;
    END IF;
    RETURN QUERY
      SELECT k.id, k.account_id, k.secret_hash, k.last_used_at, h.count, h.window_start
      FROM rate_limit_hit(p_subject_prefix || k.id::text, p_window_start) AS h;
  END
  $body$`,

  `CREATE FUNCTION preview_latest(p_account_id uuid, p_limit integer)
  RETURNS json
  LANGUAGE plpgsql STABLE AS $body$
  BEGIN
    RETURN (
      SELECT coalesce(json_agg(json_build_object(
          'id', l.id, 'call_id', l.call_id, 'source', l.source,
          'contact_external_id', l.contact_external_id, 'appointment_external_id', l.appointment_external_id
        ) ORDER BY l.created_at DESC, l.call_id, l.event, l.seq DESC), '[]'::json)
      FROM (
        SELECT DISTINCT ON (d.created_at, d.call_id, d.event)
          d.id, d.call_id, d.source, d.contact_external_id, d.appointment_external_id, d.created_at, d.event, d.seq
        FROM deliveries AS d
        WHERE d.account_id = p_account_id AND NOT d.test
        ORDER BY d.created_at DESC, d.call_id, d.event, d.seq DESC
        LIMIT p_limit
      ) AS l
    );
  END
  $body$`
])
