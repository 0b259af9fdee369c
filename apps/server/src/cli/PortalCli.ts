/**
 * `crm-relay portal link --account ID`: a single-use link to the account's
 * Integrations area, to hand to the account's own people (valid a few
 * minutes, opens once).
 */
import { Command, Options } from "@effect/cli"
import { type Context, Effect } from "effect"
import type * as Operations from "./PortalOperations.js"
import { json, print } from "./Output.js"

// Loaded when the command runs: help and the other commands never load the data access.
const withPortal = <A, E>(f: (operations: Context.Tag.Service<typeof Operations.PortalOperations>) => Effect.Effect<A, E>) =>
  Effect.flatMap(Effect.promise(() => import("./PortalOperations.js")), (operations) => operations.withOperations(f))

const link = Command.make(
  "link",
  { account: Options.text("account").pipe(Options.withDescription("Id of the account whose Integrations area the link opens.")), json },
  ({ account, json }) =>
    withPortal((operations) =>
      Effect.flatMap(operations.link(account), (minted) =>
        print(
          json,
          { url: minted.url, expires_at: minted.expiresAt },
          `${minted.url}\nSingle-use link to the Integrations area of account ${account}; it opens once, until ${minted.expiresAt}.`
        ))
    )
).pipe(Command.withDescription("Mint a single-use link to an account's Integrations area (opens once, valid a few minutes)."))

/** `crm-relay portal ...`. */
export const command = Command.make("portal").pipe(
  Command.withDescription("The Integrations area: the account's own web page (keys, hooks, CRM bridge, activity)."),
  Command.withSubcommands([link])
)
