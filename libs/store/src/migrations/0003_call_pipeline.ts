/**
 * The post-call pipeline: routing rules per account, call outcomes (one per
 * call id, ever), CRM push jobs (a durable queue: claimed with a lease,
 * rescheduled on transient failures, stopped or dead-lettered visibly,
 * replayable) and the receipt of every step a push job took.
 */
import * as Migration from "../Migration.js"

export default Migration.make([
  // Absent row: the defaults (push on; lead and booking routed).
  `CREATE TABLE routing_rules (
    account_id uuid PRIMARY KEY REFERENCES accounts (id),
    crm_push boolean NOT NULL DEFAULT true,
    classifications jsonb NOT NULL DEFAULT '["lead", "booking"]'::jsonb CHECK (jsonb_typeof(classifications) = 'array'),
    updated_at timestamptz NOT NULL DEFAULT now()
  )`,

  // The primary key is what keeps a call from being queued twice; body_digest
  // (SHA-256 of the canonical JSON body) tells a repeat from a different body.
  `CREATE TABLE call_outcomes (
    call_id text PRIMARY KEY CHECK (length(call_id) BETWEEN 1 AND 200),
    account_id uuid NOT NULL REFERENCES accounts (id),
    tenant_id text NOT NULL,
    classification text NOT NULL,
    body jsonb NOT NULL,
    body_digest text NOT NULL,
    route text NOT NULL CHECK (route IN ('push', 'event', 'store')),
    route_reason text NOT NULL DEFAULT '',
    event_kind text CHECK (event_kind IN ('lead', 'booking')),
    event_deliveries integer,
    event_fanned_out_at timestamptz,
    received_at timestamptz NOT NULL DEFAULT now()
  )`,
  `CREATE INDEX call_outcomes_account_idx ON call_outcomes (account_id, received_at DESC)`,

  // One push job per call, a JobQueue table. pending → (leased) → succeeded,
  // or failed with error_class Conflict, Auth, Permanent, NotSupported or
  // NotConfigured (stopped at once) or Transient (dead-lettered: the retry
  // schedule ended). Failed jobs can be replayed (back to pending).
  `CREATE TABLE crm_push_jobs (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    call_id text NOT NULL REFERENCES call_outcomes (call_id),
    account_id uuid NOT NULL REFERENCES accounts (id),
    tenant_id text NOT NULL,
    status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed')),
    attempts integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    lease_owner text,
    lease_expires_at timestamptz,
    last_error text,
    error_class text CHECK (error_class IN ('Conflict', 'Transient', 'Auth', 'Permanent', 'NotSupported', 'NotConfigured')),
    result jsonb,
    first_attempt_at timestamptz,
    replays integer NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    CONSTRAINT crm_push_jobs_call_id_key UNIQUE (call_id)
  )`,
  `CREATE INDEX crm_push_jobs_due_idx ON crm_push_jobs (next_attempt_at) WHERE status = 'pending'`,
  `CREATE INDEX crm_push_jobs_status_idx ON crm_push_jobs (status, updated_at DESC)`,
  `CREATE INDEX crm_push_jobs_account_idx ON crm_push_jobs (account_id, created_at DESC)`,

  // Every step's receipt (or, for a refused appointment, why), with the key sent.
  `CREATE TABLE crm_push_receipts (
    job_id uuid NOT NULL REFERENCES crm_push_jobs (id),
    operation text NOT NULL CHECK (operation IN ('contacts.upsert', 'appointments.create', 'leads.create')),
    idempotency_key text NOT NULL,
    outcome text NOT NULL CHECK (outcome IN ('receipt', 'refused')),
    receipt jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, operation)
  )`
])
