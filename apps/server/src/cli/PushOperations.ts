/**
 * What the CLI does to CRM push jobs (list the failed ones, replay one),
 * behind one tag with two Layers chosen by DataAccess: directly on the
 * database, or through the running server's internal API when the embedded
 * database belongs to it.
 */
import { CrmPushJobs } from "@crm-relay/calls"
import { Migrations } from "@crm-relay/store"
import { Context, Effect, Layer, Option } from "effect"
import { type AdminError, databaseFailure, refused } from "./AdminError.js"
import type { PushJobView } from "@crm-relay/contract/InternalApi/CallsApi"
import { pushView } from "../http/internal/CallsApiLive.js"
import * as Replay from "../http/internal/Replay.js"
import type { CliSettings } from "../config/Settings.js"
import * as DataAccess from "./DataAccess.js"

/** Listing filter. */
export interface ListFilter {
  readonly statuses: ReadonlyArray<CrmPushJobs.PushStatus>
  readonly accountId: Option.Option<string>
  readonly limit: number
}

/** CRM push job operations for the CLI. */
export class PushOperations extends Context.Tag("@crm-relay/server/PushOperations")<PushOperations, {
  readonly list: (filter: ListFilter) => Effect.Effect<ReadonlyArray<PushJobView>, AdminError>
  /** Queues a failed job again; a succeeded one only with `force`. */
  readonly replay: (id: string, options: { readonly force: boolean }) => Effect.Effect<Replay.Replayed, AdminError>
}>() {}

const unknownPush = (id: string) => refused(`No CRM push job with id ${id} exists.`)
const succeeded = (id: string) =>
  refused(`CRM push job ${id} already succeeded; replaying it would push the call to the CRM again. Add --force to do it anyway.`)

/** On the database of the context (migrated first). */
export const layerDirect = Layer.effect(
  PushOperations,
  Effect.gen(function*() {
    const jobs = yield* CrmPushJobs.CrmPushJobs
    return PushOperations.of({
      list: (filter) =>
        jobs.list({
          statuses: filter.statuses,
          limit: filter.limit,
          ...(Option.isSome(filter.accountId) ? { accountId: filter.accountId.value } : {})
        }).pipe(Effect.map((list) => list.map(pushView)), Effect.catchAllDefect((d) => Effect.fail(databaseFailure(d)))),
      replay: (id, options) =>
        jobs.replay(id, options).pipe(
          Effect.catchAllDefect((d) => Effect.fail(databaseFailure(d))),
          Effect.flatMap(Replay.found(() => unknownPush(id), () => succeeded(id)))
        )
    })
  })
).pipe(Layer.provide(CrmPushJobs.CrmPushJobs.Default), Layer.provide(Migrations.layer))

/** Through the internal API of the server at `baseUrl`. */
export const layerRemote = DataAccess.layerRemote(PushOperations, ({ client, explain }) =>
  PushOperations.of({
    list: (filter) =>
      client.pushes.list({
        urlParams: {
          status: filter.statuses.join(","),
          limit: filter.limit,
          ...(Option.isSome(filter.accountId) ? { account: filter.accountId.value } : {})
        }
      }).pipe(Effect.map((answer) => answer.pushes), Effect.mapError(explain)),
    replay: (id, options) =>
      client.pushes.replay({ path: { id }, urlParams: options.force ? { force: "true" } : {} }).pipe(
        Effect.map((answer) => answer.outcome),
        Effect.mapError((error) =>
          error._tag === "NotFound" ? unknownPush(id) : error._tag === "PushSucceeded" ? succeeded(id) : explain(error)
        )
      )
  }))

/** Chooses how to reach the push jobs (see DataAccess). */
export const layerFromSettings = (settings: CliSettings): Layer.Layer<PushOperations, AdminError> =>
  DataAccess.layerFromSettings(settings, { direct: layerDirect, remote: layerRemote })

/** Runs a CLI command with the operations for this environment (see DataAccess.withOperations). */
export const withOperations = DataAccess.withOperations(PushOperations, layerFromSettings)
