/**
 * Handlers of the in-call group of the internal API (see InCallApi).
 */
import { HttpApiBuilder } from "@effect/platform"
import { InCall } from "@crm-relay/calls"
import { Effect } from "effect"
import { InternalApi, unknownAccount } from "@crm-relay/contract/InternalApi"

/** The handlers of the in-call group. */
export const layer = HttpApiBuilder.group(InternalApi, "inCall", (handlers) =>
  Effect.gen(function*() {
    const inCall = yield* InCall.InCall
    return handlers
      .handle("contactsSearch", ({ path, payload }) =>
        inCall.contactsSearch(path.id, path.tenantId, payload).pipe(Effect.catchTag("AccountNotFound", unknownAccount)))
      .handle("contactsUpsert", ({ path, payload }) =>
        inCall.contactsUpsert(path.id, path.tenantId, payload.contact).pipe(Effect.catchTag("AccountNotFound", unknownAccount)))
      .handle("availability", ({ path, payload }) =>
        inCall.availabilityList(path.id, path.tenantId, payload.window).pipe(Effect.catchTag("AccountNotFound", unknownAccount)))
      .handle("appointments", ({ path, payload }) =>
        inCall.appointmentsCreate(path.id, path.tenantId, payload.appointment).pipe(
          Effect.catchTag("AccountNotFound", unknownAccount)
        ))
  }))
