/**
 * `BridgeStore` on any `SqlClient` speaking PostgreSQL (a real server or
 * embedded PGlite). Tables are prefixed (`refbridge_` by default) and
 * created at Layer build, idempotently.
 *
 * Each write runs in one transaction that first takes a per-tenant advisory
 * lock, so the replay check, the identity or capacity check, the write and
 * the idempotency mapping are atomic even across processes sharing the
 * database (Operation rule 5, Idempotency rule 1). The mapping's primary key
 * is a second guard against a duplicate key.
 */
import { Operations, Resources, Values } from "@crm-relay/contract"
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql"
import { Effect, Layer, Option, Schema } from "effect"
import type { ParseResult } from "effect"
import type { Booking, StoredKey, StoredRecords, WriteReceipts } from "./BridgeStore.js"
import { appointmentReceipt, BridgeStore, mergeContact, SlotTaken, UnknownContact } from "./BridgeStore.js"
import { newId, nowIso } from "./internal/ids.js"
import { identities } from "./internal/identity.js"

/** Options of the SQL store. */
export interface SqlStoreOptions {
  /** Prefix of the store's tables. Default `refbridge_`. */
  readonly tablePrefix?: string
}

const decodeContact = Schema.decodeUnknown(Resources.Contact)
const decodeLead = Schema.decodeUnknown(Resources.Lead)
const decodeAppointment = Schema.decodeUnknown(Resources.Appointment)
const decodeReceipt: {
  readonly [Op in Operations.WriteOperation]: (u: unknown) => Effect.Effect<WriteReceipts[Op], ParseResult.ParseError>
} = {
  "contacts.upsert": Schema.decodeUnknown(Operations.ContactsUpsertResponse),
  "leads.create": Schema.decodeUnknown(Operations.LeadsCreateResponse),
  "appointments.create": Schema.decodeUnknown(Operations.AppointmentsCreateResponse)
}
const encodeContact = Schema.encodeSync(Resources.Contact)
const encodeLead = Schema.encodeSync(Resources.Lead)
const encodeAppointment = Schema.encodeSync(Resources.Appointment)

/** jsonb arrives parsed from pg and PGlite; text is parsed here. */
const json = (value: unknown): unknown => typeof value === "string" ? JSON.parse(value) : value

/** Builds the store on the `SqlClient` in context, creating its tables first. */
export const make = (options: SqlStoreOptions = {}): Effect.Effect<BridgeStore["Type"], SqlError.SqlError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const prefix = options.tablePrefix ?? "refbridge_"
    if (!/^[a-z_][a-z0-9_]*$/.test(prefix)) return yield* Effect.dieMessage(`invalid table prefix ${prefix}`)
    const contacts = sql(`${prefix}contacts`)
    const leads = sql(`${prefix}leads`)
    const appointments = sql(`${prefix}appointments`)
    const keys = sql(`${prefix}idempotency`)

    // Concurrent first starts against one database must not race on CREATE TABLE.
    yield* sql.withTransaction(Effect.gen(function*() {
      yield* sql`SELECT pg_advisory_xact_lock(hashtext(${`${prefix}schema`}))`
      yield* sql`CREATE TABLE IF NOT EXISTS ${contacts} (
        seq bigserial, id text PRIMARY KEY, tenant_id text NOT NULL, body jsonb NOT NULL,
        phones jsonb NOT NULL, emails jsonb NOT NULL, created_at text NOT NULL, updated_at text NOT NULL)`
      yield* sql`CREATE TABLE IF NOT EXISTS ${leads} (
        seq bigserial, id text PRIMARY KEY, tenant_id text NOT NULL, idempotency_key text NOT NULL,
        body jsonb NOT NULL, created_at text NOT NULL)`
      yield* sql`CREATE TABLE IF NOT EXISTS ${appointments} (
        seq bigserial, id text PRIMARY KEY, tenant_id text NOT NULL, idempotency_key text NOT NULL,
        contact_id text NOT NULL, start_ms bigint NOT NULL, end_ms bigint NOT NULL, body jsonb NOT NULL,
        created_at text NOT NULL)`
      yield* sql`CREATE TABLE IF NOT EXISTS ${keys} (
        seq bigserial, tenant_id text NOT NULL, operation text NOT NULL, idempotency_key text NOT NULL,
        receipt jsonb NOT NULL, created_at text NOT NULL, PRIMARY KEY (tenant_id, operation, idempotency_key))`
      yield* sql`CREATE INDEX IF NOT EXISTS ${sql(`${prefix}contacts_tenant`)} ON ${contacts} (tenant_id)`
      yield* sql`CREATE INDEX IF NOT EXISTS ${sql(`${prefix}appointments_tenant`)} ON ${appointments} (tenant_id, start_ms)`
    }))

    /** Runs `effect` in a transaction holding the tenant's write lock; database failures are defects. */
    const atomically = <A, E, R>(tenantId: string, effect: Effect.Effect<A, E, R>) =>
      sql.withTransaction(
        Effect.zipRight(sql`SELECT pg_advisory_xact_lock(hashtext(${`${prefix}${tenantId}`}))`, effect)
      ).pipe(Effect.catchTag("SqlError", Effect.die))

    /**
     * A write under idempotency key `key`: the receipt first answered for it
     * when the write was already done, else `write`'s, mapped to the key — all
     * in one transaction under the tenant's lock (Idempotency rule 1).
     */
    const once = <Op extends Operations.WriteOperation, E>(
      tenantId: string,
      operation: Op,
      key: string,
      write: (now: string) => Effect.Effect<WriteReceipts[Op], E | SqlError.SqlError>
    ) =>
      Effect.flatMap(nowIso, (now) =>
        atomically(tenantId, Effect.gen(function*() {
          const [previous] = yield* sql<{ receipt: unknown }>`SELECT receipt FROM ${keys}
            WHERE tenant_id = ${tenantId} AND operation = ${operation} AND idempotency_key = ${key}`
          if (previous !== undefined) return yield* Effect.orDie(decodeReceipt[operation](json(previous.receipt)))
          const receipt = yield* write(now)
          yield* sql`INSERT INTO ${keys} (tenant_id, operation, idempotency_key, receipt, created_at)
            VALUES (${tenantId}, ${operation}, ${key}, ${JSON.stringify(receipt)}::jsonb, ${now})`
          return receipt
        })))

    const matching = (tenantId: string, phones: ReadonlyArray<string>, emails: ReadonlyArray<string>) =>
      sql<{ id: string; body: unknown }>`SELECT c.id, c.body FROM ${contacts} c
        WHERE c.tenant_id = ${tenantId} AND (
          EXISTS (SELECT 1 FROM jsonb_array_elements_text(c.phones) AS p(v)
                  JOIN jsonb_array_elements_text(${JSON.stringify(phones)}::jsonb) AS w(v) ON p.v = w.v)
          OR EXISTS (SELECT 1 FROM jsonb_array_elements_text(c.emails) AS e(v)
                  JOIN jsonb_array_elements_text(${JSON.stringify(emails)}::jsonb) AS w(v) ON e.v = w.v))
        ORDER BY c.seq LIMIT 1`

    const searchContact = (tenantId: string, phone: string, email: string) => {
      const wanted = identities({ phones: [phone], emails: [email] })
      return matching(tenantId, wanted.phones, wanted.emails).pipe(
        Effect.map((rows) => Option.fromNullable(rows[0]?.id)),
        Effect.orDie
      )
    }

    const upsertContact = (tenantId: string, key: string, contact: Resources.Contact) =>
      once(tenantId, "contacts.upsert", key, (now) =>
        Effect.gen(function*() {
          const wanted = identities(contact)
          const [match] = yield* matching(tenantId, wanted.phones, wanted.emails)
          if (match === undefined) {
            const id = yield* newId("ct")
            yield* sql`INSERT INTO ${contacts} (id, tenant_id, body, phones, emails, created_at, updated_at)
              VALUES (${id}, ${tenantId}, ${JSON.stringify(encodeContact(contact))}::jsonb,
                ${JSON.stringify(wanted.phones)}::jsonb, ${JSON.stringify(wanted.emails)}::jsonb, ${now}, ${now})`
            return { id: Values.NonBlankString.make(id), is_new: true }
          }
          const merged = mergeContact(yield* Effect.orDie(decodeContact(json(match.body))), contact)
          const mergedIds = identities(merged)
          yield* sql`UPDATE ${contacts} SET body = ${JSON.stringify(encodeContact(merged))}::jsonb,
            phones = ${JSON.stringify(mergedIds.phones)}::jsonb, emails = ${JSON.stringify(mergedIds.emails)}::jsonb,
            updated_at = ${now} WHERE id = ${match.id}`
          return { id: Values.NonBlankString.make(match.id), is_new: false }
        }))

    const createLead = (tenantId: string, key: string, lead: Resources.Lead) =>
      once(tenantId, "leads.create", key, (now) =>
        Effect.gen(function*() {
          const id = yield* newId("ld")
          yield* sql`INSERT INTO ${leads} (id, tenant_id, idempotency_key, body, created_at)
            VALUES (${id}, ${tenantId}, ${key}, ${JSON.stringify(encodeLead(lead))}::jsonb, ${now})`
          return { id: Values.NonBlankString.make(id) }
        }))

    const bookedIntervals = (tenantId: string, fromMs: number, toMs: number) =>
      sql<{ start_ms: string | number; end_ms: string | number }>`SELECT start_ms, end_ms FROM ${appointments}
        WHERE tenant_id = ${tenantId} AND start_ms < ${toMs}::bigint AND end_ms > ${fromMs}::bigint`.pipe(
        Effect.map((rows) => rows.map((r) => ({ startMs: Number(r.start_ms), endMs: Number(r.end_ms) }))),
        Effect.orDie
      )

    const createAppointment = (tenantId: string, key: string, booking: Booking) =>
      once(tenantId, "appointments.create", key, (now) =>
        Effect.gen(function*() {
          const contactId = booking.appointment.contact_external_id
          const known = yield* sql`SELECT 1 FROM ${contacts} WHERE tenant_id = ${tenantId} AND id = ${contactId}`
          if (known.length === 0) {
            return yield* new UnknownContact({ contactId, message: "contact_external_id names no contact of this tenant" })
          }
          const [row] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM ${appointments}
            WHERE tenant_id = ${tenantId} AND start_ms < ${booking.endMs}::bigint AND end_ms > ${booking.startMs}::bigint`
          if ((row?.n ?? 0) >= booking.capacity) return yield* new SlotTaken({ message: "the requested slot is taken" })
          const id = yield* newId("ap")
          yield* sql`INSERT INTO ${appointments}
            (id, tenant_id, idempotency_key, contact_id, start_ms, end_ms, body, created_at)
            VALUES (${id}, ${tenantId}, ${key}, ${contactId}, ${booking.startMs}::bigint, ${booking.endMs}::bigint,
              ${JSON.stringify(encodeAppointment(booking.appointment))}::jsonb, ${now})`
          return appointmentReceipt(id, booking.appointment)
        }))

    const records: Effect.Effect<StoredRecords> = Effect.gen(function*() {
      const contactRows = yield* sql<{ id: string; tenant_id: string; body: unknown; created_at: string; updated_at: string }>`
        SELECT id, tenant_id, body, created_at, updated_at FROM ${contacts} ORDER BY seq`
      const leadRows = yield* sql<{ id: string; tenant_id: string; idempotency_key: string; body: unknown; created_at: string }>`
        SELECT id, tenant_id, idempotency_key, body, created_at FROM ${leads} ORDER BY seq`
      const appointmentRows = yield* sql<{
        id: string
        tenant_id: string
        idempotency_key: string
        start_ms: string | number
        end_ms: string | number
        body: unknown
        created_at: string
      }>`SELECT id, tenant_id, idempotency_key, start_ms, end_ms, body, created_at FROM ${appointments} ORDER BY seq`
      const keyRows = yield* sql<{
        tenant_id: string
        operation: string
        idempotency_key: string
        receipt: unknown
        created_at: string
      }>`SELECT tenant_id, operation, idempotency_key, receipt, created_at FROM ${keys} ORDER BY seq`
      return {
        contacts: yield* Effect.forEach(contactRows, (r) =>
          Effect.map(decodeContact(json(r.body)), (contact) => ({
            tenantId: r.tenant_id,
            id: r.id,
            contact,
            createdAt: r.created_at,
            updatedAt: r.updated_at
          }))),
        leads: yield* Effect.forEach(leadRows, (r) =>
          Effect.map(decodeLead(json(r.body)), (lead) => ({
            tenantId: r.tenant_id,
            id: r.id,
            idempotencyKey: r.idempotency_key,
            lead,
            createdAt: r.created_at
          }))),
        appointments: yield* Effect.forEach(appointmentRows, (r) =>
          Effect.map(decodeAppointment(json(r.body)), (appointment) => ({
            tenantId: r.tenant_id,
            id: r.id,
            idempotencyKey: r.idempotency_key,
            appointment,
            startMs: Number(r.start_ms),
            endMs: Number(r.end_ms),
            createdAt: r.created_at
          }))),
        idempotency: yield* Effect.forEach(keyRows, (r) => decodeKey(r))
      }
    }).pipe(Effect.orDie)

    const decodeKey = (r: {
      tenant_id: string
      operation: string
      idempotency_key: string
      receipt: unknown
      created_at: string
    }): Effect.Effect<StoredKey, unknown> => {
      const common = { tenantId: r.tenant_id, idempotencyKey: r.idempotency_key, createdAt: r.created_at }
      switch (r.operation) {
        case "contacts.upsert":
          return Effect.map(decodeReceipt["contacts.upsert"](json(r.receipt)), (receipt) => ({ ...common, operation: "contacts.upsert" as const, receipt }))
        case "leads.create":
          return Effect.map(decodeReceipt["leads.create"](json(r.receipt)), (receipt) => ({ ...common, operation: "leads.create" as const, receipt }))
        case "appointments.create":
          return Effect.map(decodeReceipt["appointments.create"](json(r.receipt)), (receipt) => ({ ...common, operation: "appointments.create" as const, receipt }))
        default:
          return Effect.fail(`unknown operation ${r.operation} in ${prefix}idempotency`)
      }
    }

    const reset = Effect.gen(function*() {
      yield* sql`DELETE FROM ${keys}`
      yield* sql`DELETE FROM ${appointments}`
      yield* sql`DELETE FROM ${leads}`
      yield* sql`DELETE FROM ${contacts}`
    }).pipe(sql.withTransaction, Effect.orDie)

    return BridgeStore.of({ searchContact, upsertContact, createLead, bookedIntervals, createAppointment, records, reset })
  })

/** `BridgeStore` on the `SqlClient` in context; creates its tables when built. */
export const layer = (options: SqlStoreOptions = {}): Layer.Layer<BridgeStore, SqlError.SqlError, SqlClient.SqlClient> =>
  Layer.effect(BridgeStore, make(options))
