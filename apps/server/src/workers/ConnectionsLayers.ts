/**
 * Secrets and connections in the server: the Vault (under this process's
 * master keys), bridge connections, webhook signing secrets and the in-call
 * operations, over the database and the bridge side. Building it checks
 * that the master keys open the stored data keys, so a server with the
 * wrong MASTER_KEY refuses to start instead of failing call by call.
 */
import { Connections, InCall } from "@crm-relay/calls"
import { SigningSecrets } from "@crm-relay/events"
import { Vault } from "@crm-relay/store"
import { Effect, Layer } from "effect"

/** What this composition provides. */
export type Services = Vault.Vault | Connections.Connections | SigningSecrets.SigningSecrets | InCall.InCall

const checked = Layer.effectDiscard(Effect.flatMap(Vault.Vault, (vault) => vault.check))

/** The services over `keys`; build it after the migrations. */
export const layer = (keys: Vault.MasterKeys) =>
  Layer.mergeAll(InCall.InCall.Default, checked).pipe(
    Layer.provideMerge(Layer.merge(Connections.Connections.Default, SigningSecrets.SigningSecrets.Default)),
    Layer.provideMerge(Vault.layer(keys))
  )
