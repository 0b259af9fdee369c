/**
 * Webhook delivery: every attempt of every delivery, as the operator reads
 * it (when, which attempt, the receiver's status or none, how long, what
 * class of failure and a short reason, and what was decided).
 */
import * as Migration from "../Migration.js"

export default Migration.make([
  `CREATE TABLE delivery_attempts (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    delivery_id uuid NOT NULL REFERENCES deliveries (id),
    attempt integer NOT NULL CHECK (attempt >= 1),
    started_at timestamptz NOT NULL,
    status_code integer CHECK (status_code BETWEEN 100 AND 999),
    duration_ms integer NOT NULL CHECK (duration_ms >= 0),
    error_class text,
    error text CHECK (length(error) <= 500),
    result text NOT NULL CHECK (result IN ('delivered', 'retry', 'failed'))
  )`,
  // A delivery's attempts, latest first (the operator listing reads the latest one).
  `CREATE INDEX delivery_attempts_delivery_idx ON delivery_attempts (delivery_id, id DESC)`
])
