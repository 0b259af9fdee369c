/**
 * The CRM push worker: runs due push jobs from the `crm_push_jobs` queue.
 *
 * One run of a job: load the stored outcome and the tenant's connection,
 * resume the steps after the receipts already stored (Steps), then, in the
 * transaction that finishes the job, fan the event out (once per call):
 * - success → `succeeded`, with what the push produced;
 * - Transient (429, 5xx, network, timeout) → rescheduled after the delay
 *   the retry schedule gives for this attempt (never less than the bridge's
 *   Retry-After), or dead-lettered (`failed`, error class `Transient`) when
 *   the schedule ends — except a requested booking whose appointments.create
 *   never went through: a captured lead is never lost, so the booking is
 *   given up (stored as refused, as after a 409) and the job runs again at
 *   once, with a retry schedule of its own, to write the lead carrying the
 *   request (the event then says `requested`);
 * - Conflict, Auth, Permanent, NotSupported, NotConfigured → `failed` at
 *   once, visible to the operator, replayable.
 *
 * A job that failed for good still announces the call: the subscriber wants
 * the captured lead, so the event goes out with `contact.external_id` from the
 * upsert receipt when there is one, else "" (and a booking stays
 * `requested`). It is sent once per call: a replay that later succeeds does
 * not send a second event.
 */
import type { BridgeClient, Connection } from "@crm-relay/bridge"
import { BridgeClients, Schedules } from "@crm-relay/bridge"
import * as SqlClient from "@effect/sql/SqlClient"
import * as JobQueue from "@crm-relay/store/JobQueue"
import { Clock, Duration, Effect, Option } from "effect"
import { eventOf, withoutPush } from "@crm-relay/events/Announcement"
import { Outcomes } from "../Outcomes/Outcomes.js"
import { CrmPushJobs, type ErrorClass, jobTable, type PushJobRow } from "./Jobs.js"
import { CrmPushReceipts } from "./Receipts.js"
import { CrmPushRetry, nextDelay } from "./Retry.js"
import * as Steps from "./Steps.js"

/** A tenant's connection with the operations its bridge advertised when it was checked. */
export interface ConnectionForPush {
  readonly connection: Connection.Connection
  readonly capabilities: Option.Option<ReadonlyArray<string>>
}

/** Finds the connection of an account's tenant (decrypted, ready for `BridgeClients.forConnection`). */
export type ConnectionLookup = (accountId: string, tenantId: string) => Effect.Effect<Option.Option<ConnectionForPush>>

/** How the worker runs. */
export interface WorkerOptions extends JobQueue.RunOptions {}

const describe = (failure: Steps.PushFailure): string =>
  failure._tag === "NotSupported" ? failure.message : `${failure.operation}: ${failure.message}`

/** Handles one claimed push job (exposed for tests). */
export const handle = (lookup: ConnectionLookup) =>
  Effect.fn("CrmPush.handle")(function*(job: JobQueue.Job<PushJobRow>) {
    const sql = yield* SqlClient.SqlClient
    const outcomes = yield* Outcomes
    const receipts = yield* CrmPushReceipts
    const clients = yield* BridgeClients
    const { schedule } = yield* CrmPushRetry
    const { account_id: accountId, call_id: callId, tenant_id: tenantId } = job.data
    const now = yield* Clock.currentTimeMillis

    const firstAttemptAt = Option.match(Option.fromNullable(job.data.first_attempt_at), {
      onNone: () => now,
      onSome: (d) => d.getTime()
    })
    if (job.data.first_attempt_at === null) {
      yield* sql`UPDATE crm_push_jobs SET first_attempt_at = ${new Date(now)}, updated_at = now() WHERE id = ${job.id}`
        .pipe(Effect.orDie)
    }

    const loaded = yield* outcomes.load(callId)
    if (Option.isNone(loaded)) {
      return JobQueue.JobResult.DeadLetter({ error: "The call outcome of this job is missing." })
    }
    const outcome = loaded.value

    // Announces the call after a push that stopped, then records why it stopped.
    const stop = (errorClass: ErrorClass, error: string) =>
      Effect.gen(function*() {
        const steps = yield* receipts.list(job.id)
        return JobQueue.JobResult.DeadLetter({
          error,
          record: Effect.gen(function*() {
            yield* sql`UPDATE crm_push_jobs SET error_class = ${errorClass}, finished_at = now(), updated_at = now()
                WHERE id = ${job.id}`
            yield* outcomes.announce(callId, eventOf(callId, outcome, withoutPush(outcome, steps)))
          })
        })
      })

    const found = yield* lookup(accountId, tenantId)
    if (Option.isNone(found)) {
      return yield* stop("NotConfigured", `Tenant ${tenantId} has no bridge connection any more.`)
    }
    const client: Option.Option<BridgeClient["Type"]> = yield* clients.forConnection(found.value.connection).pipe(
      Effect.map(Option.some),
      Effect.catchTag("InvalidConnection", () => Effect.succeed(Option.none()))
    )
    if (Option.isNone(client)) {
      return yield* stop("NotConfigured", `The bridge connection of tenant ${tenantId} is not usable; set it again.`)
    }

    const stored = yield* receipts.list(job.id)
    const result = yield* Effect.either(
      Steps.run(
        { callId, outcome, capabilities: found.value.capabilities },
        client.value,
        { stored, put: (step) => receipts.put(job.id, step) }
      )
    )

    if (result._tag === "Right") {
      const pushed = result.right
      yield* Effect.logInfo("CRM push succeeded").pipe(Effect.annotateLogs({ call_id: callId }))
      return JobQueue.JobResult.Complete({
        record: Effect.gen(function*() {
          const summary = {
            contact_external_id: pushed.contactExternalId,
            lead_external_id: pushed.leadExternalId,
            appointment: Option.getOrNull(
              Option.map(pushed.appointment, (a) => ({ status: a.status, external_id: a.externalId }))
            )
          }
          yield* sql`UPDATE crm_push_jobs SET result = ${JSON.stringify(summary)}::jsonb, error_class = NULL,
              finished_at = now(), updated_at = now() WHERE id = ${job.id}`
          yield* outcomes.announce(callId, eventOf(callId, outcome, pushed))
        })
      })
    }

    const failure = result.left
    const message = describe(failure)
    if (failure._tag === "Transient") {
      const elapsed = Duration.millis(Math.max(0, now - firstAttemptAt))
      // Never sooner than the bridge asked (Retry-After, bounded to five minutes), whatever the schedule.
      const delay = Option.map(
        yield* nextDelay(schedule, job.attempt, failure, elapsed),
        (d) => Duration.max(d, Schedules.requestedWait(failure))
      )
      if (Option.isSome(delay)) {
        yield* Effect.logWarning("CRM push failed transiently; rescheduled").pipe(
          Effect.annotateLogs({ call_id: callId, problem: message, retry_in: Duration.format(delay.value) })
        )
        return JobQueue.JobResult.Retry({
          delay: delay.value,
          error: message,
          record: sql`UPDATE crm_push_jobs SET error_class = 'Transient', updated_at = now() WHERE id = ${job.id}`
            .pipe(Effect.asVoid)
        })
      }
      const givenUp = failure.operation === "appointments.create"
        ? Steps.bookingGivenUp(
          { callId, outcome, capabilities: found.value.capabilities },
          client.value.tenantId,
          yield* receipts.list(job.id),
          failure
        )
        : Option.none()
      if (Option.isSome(givenUp)) {
        yield* Effect.logWarning("CRM push: the requested booking could not be made; the lead carries the request").pipe(
          Effect.annotateLogs({ call_id: callId, problem: message, attempts: job.attempt })
        )
        return JobQueue.JobResult.Retry({
          delay: Duration.zero,
          error: message,
          // The lead starts a schedule of its own, as on a replay: attempts and first attempt afresh.
          set: { attempts: 0, first_attempt_at: null },
          record: Effect.zipRight(
            receipts.put(job.id, givenUp.value),
            sql`UPDATE crm_push_jobs SET error_class = 'Transient', updated_at = now() WHERE id = ${job.id}`
          ).pipe(Effect.asVoid)
        })
      }
      yield* Effect.logError("CRM push dead-lettered: the retry schedule ended").pipe(
        Effect.annotateLogs({ call_id: callId, problem: message, attempts: job.attempt })
      )
      return yield* stop("Transient", `The retry schedule ended after ${job.attempt} attempts; last failure: ${message}`)
    }
    yield* Effect.logError("CRM push stopped").pipe(
      Effect.annotateLogs({ call_id: callId, error_class: failure._tag, problem: message })
    )
    return yield* stop(failure._tag, message)
  }, Effect.orDie)

/** The worker loop: runs due push jobs until interrupted (a clean stop releases running jobs). */
export const run = (lookup: ConnectionLookup, options: WorkerOptions = {}) =>
  JobQueue.run(jobTable, (job) => handle(lookup)(job), options)

/** Services the worker uses besides the queue's. */
export type WorkerServices = Outcomes | CrmPushReceipts | CrmPushJobs | BridgeClients
