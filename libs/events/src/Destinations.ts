/**
 * An account's event destinations (migration 0016), managed through the
 * internal API, never the public Event API: a destination is a kind, its
 * configuration and its credentials (sealed in the Vault, as bridge
 * credentials are), receiving events through one subscription row of its
 * own. That row gives it everything a REST hook has: the fan-out, the
 * delivery queue and its fair share (its `target_url` is the destination's
 * address, so the fair-share key is the broker's host), the lifecycle
 * (SubscriptionLifecycle: failing since, auto-disable, enable, disable,
 * recover), test events (Fanout.test), retention and the attempt log.
 *
 * Creating one runs the kind's `check` first: nothing is stored unless the
 * kind is known, the configuration decodes, and the target answers.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Audit from "@crm-relay/store/Audit"
import { isUuid } from "@crm-relay/store/Ids"
import { Notifier } from "@crm-relay/store"
import { Vault } from "@crm-relay/store/Vault"
import { Data, Effect, Option, Redacted, Schema } from "effect"
import { randomUUID } from "node:crypto"
import { DestinationRefused, type DestinationService, type Target } from "./Destination.js"
import { DestinationKinds } from "./DestinationKinds.js"
import * as DestinationRemovals from "./DestinationRemovals.js"

/** The events a destination receives: leads, bookings, or all. */
export const DestinationEvent = Schema.Literal("lead", "booking", "all")
export type DestinationEvent = typeof DestinationEvent.Type

/** A destination as its owner sees it (never its credentials). */
export const DestinationSummary = Schema.Struct({
  id: Schema.String,
  account_id: Schema.String,
  kind: Schema.String,
  name: Schema.String,
  event: Schema.String,
  config: Schema.Unknown,
  has_credentials: Schema.Boolean,
  /** The subscription row that carries its deliveries (for deliveries, test events, recover). */
  subscription_id: Schema.String,
  created_at: Schema.DateFromSelf,
  failing_since: Schema.NullOr(Schema.DateFromSelf),
  disabled_at: Schema.NullOr(Schema.DateFromSelf),
  disabled_reason: Schema.NullOr(Schema.String)
})
export type DestinationSummary = typeof DestinationSummary.Type

/** No destination of the account has this id (or it was removed). */
export class DestinationNotFound extends Data.TaggedError("DestinationNotFound")<{ readonly id: string }> {
  override get message(): string {
    return "No destination of this account has this id."
  }
}

/** What `create` takes. */
export interface NewDestination {
  readonly accountId: string
  readonly kind: string
  readonly name: string
  readonly event: DestinationEvent
  /** The kind's configuration (validated by the kind's Schema); every kind's has the `url` of its target. */
  readonly config: unknown
  /** The kind's credentials (its own JSON text), sealed before they are stored. */
  readonly credentials: Option.Option<Redacted.Redacted<string>>
}

/** The additional data binding a destination's sealed credentials to it. */
const bindingOf = (accountId: string, id: string): string => `destination:${accountId}:${id}`

/** The address of a configuration (its `url`), stored as the subscription's `target_url`. */
const addressOf = (config: unknown): string | undefined =>
  typeof config === "object" && config !== null && "url" in config && typeof config.url === "string" ? config.url : undefined

interface Row {
  readonly kind: string
  readonly account_id: string
  readonly config: unknown
  readonly credentials_secret_id: string | null
}

/** Creates, lists, removes and loads destinations. */
export class Destinations extends Effect.Service<Destinations>()("@crm-relay/events/Destinations", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const vault = yield* Vault
    const kinds = yield* DestinationKinds
    const notifier = yield* Notifier.Notifier
    const decodeSummaries = Schema.decodeUnknown(Schema.Array(DestinationSummary))
    const parsed = (config: unknown) => (typeof config === "string" ? JSON.parse(config) as unknown : config)

    const summaries = (accountId: string, id: string | null) =>
      sql`SELECT d.id, d.account_id, d.kind, d.name, s.event, d.config, d.credentials_secret_id IS NOT NULL AS has_credentials,
            s.id AS subscription_id, d.created_at, s.failing_since, s.disabled_at, s.disabled_reason
          FROM destinations AS d JOIN subscriptions AS s ON s.destination_id = d.id
          WHERE d.account_id = ${accountId} AND d.removed_at IS NULL ${id === null ? sql`` : sql`AND d.id = ${id}`}
          ORDER BY d.created_at, d.id`.pipe(
        Effect.map((rows) => rows.map((row) => ({ ...row, config: parsed(row.config) }))),
        Effect.flatMap(decodeSummaries),
        Effect.orDie
      )

    const find = (accountId: string, id: string) =>
      isUuid(id)
        ? Effect.flatMap(summaries(accountId, id), (rows) =>
          rows.length === 0 ? Effect.fail(new DestinationNotFound({ id })) : Effect.succeed(rows[0]!))
        : Effect.fail(new DestinationNotFound({ id }))

    // The kind and target of a destination, its credentials unsealed (the worker's view; any account).
    function load(id: string): Effect.Effect<{ readonly destination: DestinationService; readonly target: Target }, DestinationRefused> {
      return Effect.gen(function*() {
        const rows = yield* sql<Row>`SELECT kind, account_id, config, credentials_secret_id FROM destinations WHERE id = ${id}`.pipe(
          Effect.orDie
        )
        const row = rows[0]
        if (row === undefined) return yield* new DestinationRefused({ reason: "missing", message: "The destination no longer exists." })
        const destination = yield* kinds.get(row.kind)
        const credentials = row.credentials_secret_id === null
          ? Option.none<Redacted.Redacted<string>>()
          : Option.some(
            yield* vault.open(row.credentials_secret_id, bindingOf(row.account_id, id)).pipe(
              Effect.mapError(() =>
                new DestinationRefused({ reason: "credentials", message: "The destination's credentials could not be opened." })
              )
            )
          )
        return { destination, target: { config: parsed(row.config), credentials } }
      })
    }

    return {
      /**
       * The kind and target of a destination of any account, its credentials unsealed: what the
       * delivery worker publishes with (it keeps them: a destination never changes, it is removed).
       */
      load,

      /** The kinds this process can deliver to. */
      kinds: kinds.kinds,

      /**
       * Checks the destination through its kind (known kind, valid configuration, reachable,
       * credentials accepted) and only then stores it, its credentials sealed.
       */
      create: Effect.fn("Destinations.create")(function*(input: NewDestination) {
        const destination = yield* kinds.get(input.kind)
        const address = addressOf(input.config)
        if (address === undefined) {
          return yield* new DestinationRefused({ reason: "invalid_config", message: "The configuration must name the target's url." })
        }
        yield* destination.check({ config: input.config, credentials: input.credentials })
        const id = randomUUID()
        yield* sql.withTransaction(Effect.gen(function*() {
          const secretId = Option.isSome(input.credentials)
            ? yield* vault.store(input.credentials.value, bindingOf(input.accountId, id))
            : null
          yield* sql`INSERT INTO destinations (id, account_id, kind, name, config, credentials_secret_id)
            VALUES (${id}, ${input.accountId}, ${input.kind}, ${input.name}, ${JSON.stringify(input.config)}::jsonb, ${secretId})`
          yield* sql`INSERT INTO subscriptions (account_id, target_url, event, destination_id)
            VALUES (${input.accountId}, ${address}, ${input.event}, ${id})`
        })).pipe(Effect.orDie)
        yield* Audit.record("destination.created", { account_id: input.accountId, destination_id: id, kind: input.kind })
        return yield* Effect.orDie(find(input.accountId, id))
      }),

      /** The account's destinations, oldest first. */
      list: (accountId: string) => summaries(accountId, null),

      /** One destination of the account. */
      find,

      /** Runs the kind's check again on the stored destination (a "Test connection"). */
      check: Effect.fn("Destinations.check")(function*(accountId: string, id: string) {
        yield* find(accountId, id)
        const { destination, target } = yield* Effect.orDie(load(id))
        yield* destination.check(target)
      }),

      /**
       * Removes a destination: nothing more is queued for it, its pending deliveries fail unsent, its
       * sealed credentials are deleted from the Vault (the row stays for the attempt log, pointing at
       * none), and the removal is announced to every replica (DestinationRemovals), so whichever
       * process holds something for it (the delivery worker's broker connection) lets go at once.
       */
      remove: Effect.fn("Destinations.remove")(function*(accountId: string, id: string) {
        const summary = yield* find(accountId, id)
        yield* sql.withTransaction(Effect.gen(function*() {
          const rows = yield* sql<{ credentials_secret_id: string | null }>`
            SELECT credentials_secret_id FROM destinations WHERE id = ${id} FOR UPDATE`
          yield* sql`UPDATE destinations SET removed_at = now(), credentials_secret_id = NULL WHERE id = ${id}`
          yield* sql`UPDATE subscriptions SET removed_at = now(), removed_reason = 'unsubscribed'
            WHERE id = ${summary.subscription_id} AND removed_at IS NULL`
          const secretId = rows[0]?.credentials_secret_id ?? null
          if (secretId !== null) yield* vault.remove(secretId)
          // Sent at the commit: a replica that hears it finds the destination removed.
          yield* DestinationRemovals.announce(id).pipe(Effect.provideService(Notifier.Notifier, notifier))
        })).pipe(Effect.orDie)
        yield* Audit.record("destination.removed", { account_id: accountId, destination_id: id })
      })
    }

  })
}) {}
