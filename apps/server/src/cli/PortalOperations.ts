/**
 * What `crm-relay portal link` does, on the database or through a running
 * server's internal API (DataAccess chooses): mint a single-use link to an
 * account's Integrations area.
 */
import { Database, Migrations } from "@crm-relay/store"
import { Context, Effect, Layer, Option } from "effect"
import { type AdminError, databaseFailure, unknownAccount } from "./AdminError.js"
import { linkUrl } from "../http/portal/PortalLinks.js"
import { PortalSessions } from "../http/portal/PortalSessions.js"
import type { CliSettings } from "../config/Settings.js"
import * as DataAccess from "./DataAccess.js"

/** A minted link. */
export interface Link {
  readonly url: string
  readonly expiresAt: string
}

/** Single-use links to an account's Integrations area. */
export class PortalOperations extends Context.Tag("@crm-relay/server/PortalOperations")<
  PortalOperations,
  { readonly link: (accountId: string) => Effect.Effect<Link, AdminError> }
>() {}

/** The base URL links point at without a running server: PORTAL_PUBLIC_URL, or PORTAL_HOST:PORTAL_PORT. */
export const baseUrlOf = (portal: CliSettings["portal"]): string =>
  Option.getOrElse(portal.publicUrl, () => `http://${portal.host.includes(":") ? `[${portal.host}]` : portal.host}:${portal.port}`)

/** On the database of the context (migrated first). */
export const layerDirect = (settings: CliSettings) =>
  Layer.effect(
    PortalOperations,
    Effect.gen(function*() {
      const sessions = yield* PortalSessions
      return PortalOperations.of({
        link: (accountId) =>
          sessions.mint(accountId).pipe(
            Effect.map((minted) => ({ url: linkUrl(baseUrlOf(settings.portal), minted.token), expiresAt: minted.expiresAt.toISOString() })),
            Effect.catchTag("UnknownAccount", () => Effect.fail(unknownAccount(accountId))),
            Effect.catchAllDefect((defect) => Effect.fail(databaseFailure(defect)))
          )
      })
    })
  ).pipe(Layer.provide(PortalSessions.Default), Layer.provide(Migrations.layer)) satisfies Layer.Layer<PortalOperations, unknown, Database.Services>

/** Through the internal API of the server at `baseUrl`. */
export const layerRemote = DataAccess.layerRemote(PortalOperations, ({ client, explain }) =>
  PortalOperations.of({
    link: (accountId) =>
      client.portalSessions.create({ path: { id: accountId } }).pipe(
        Effect.map((answer) => ({ url: answer.url, expiresAt: answer.expires_at })),
        Effect.mapError((error) => (error._tag === "NotFound" ? unknownAccount(accountId) : explain(error)))
      )
  }))

/** Runs a CLI command with the operations for this environment (see DataAccess.withOperations). */
export const withOperations = DataAccess.withOperations(
  PortalOperations,
  (settings: CliSettings) => DataAccess.layerFromSettings(settings, { direct: layerDirect(settings), remote: layerRemote })
)
