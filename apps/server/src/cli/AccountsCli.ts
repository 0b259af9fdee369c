/**
 * Listing what an account holds: `accounts list|show`, `keys list`
 * (never a key: its last four characters), `subscriptions list|remove`
 * (the hooks automation platforms registered; event-api.md asks to check
 * them before repeating a POST /subscribe).
 */
import { Command, Options } from "@effect/cli"
import { type Context, Effect } from "effect"
import type * as Admin from "./AdminOperations.js"
import type { AccountView, KeyView, SubscriptionView } from "@crm-relay/contract/InternalApi/ListingsApi"
import * as Flags from "./Flags.js"
import { describeStatus, lifecycleCommands } from "./SubscriptionsCli.js"
import { json, print } from "./Output.js"

// Loaded when the command runs: help and the other commands never load the data access.
const withOperations = <A, E>(f: (operations: Context.Tag.Service<typeof Admin.AdminOperations>) => Effect.Effect<A, E>) =>
  Effect.flatMap(Effect.promise(() => import("./AdminOperations.js")), (admin) => admin.withOperations(f))

const account = (what: string) => Options.text("account").pipe(Options.withDescription(`Id of the account whose ${what}.`))

const describeAccount = (a: AccountView) => `${a.id}  ${a.mode}  created ${a.created_at}  ${a.name}`

const describeKey = (k: KeyView) =>
  `${k.id}  …${k.last_four ?? "????"}  created ${k.created_at}  last used ${k.last_used_at ?? "never"}` +
  `${k.disabled ? `  disabled ${k.disabled_at}` : ""}`

const describeSubscription = (s: SubscriptionView) =>
  `${describeStatus(s)}\n    created ${s.created_at} ${s.created_by_key_id === null ? "in the Integrations area" : `by key ${s.created_by_key_id}`}`

const listAccounts = Command.make("list", { limit: Flags.limit, cursor: Flags.cursor, json }, (flags) =>
  withOperations((operations) =>
    Effect.flatMap(operations.listAccounts(Flags.pageRequest(flags)), (page) =>
      print(
        flags.json,
        page,
        [
          page.accounts.length === 0 ? "No accounts." : page.accounts.map(describeAccount).join("\n"),
          ...Flags.moreLine(page.next_cursor, "crm-relay accounts list")
        ].join("\n")
      ))
  )).pipe(Command.withDescription("List accounts, oldest first: id, mode, creation time and name."))

const showAccount = Command.make(
  "show",
  { account: Options.text("account").pipe(Options.withDescription("Id of the account to show.")), json },
  ({ account, json }) =>
    withOperations((operations) =>
      Effect.flatMap(operations.showAccount(account), (a) =>
        print(
          json,
          a,
          [
            `Account ${a.id}: ${a.name}`,
            `  mode ${a.mode}, created ${a.created_at}`,
            `  ${a.active_keys} active integration key(s), ${a.subscriptions} subscription(s), ${a.connections} bridge connection(s)`
          ].join("\n")
        ))
    )
).pipe(Command.withDescription("Show one account: name, mode, creation time, and how many keys, subscriptions and connections it has."))

/** `accounts list` and `accounts show`. */
export const accountCommands = [listAccounts, showAccount] as const

const listKeys = Command.make(
  "list",
  { account: account("keys to list"), limit: Flags.limit, cursor: Flags.cursor, json },
  ({ account, json, ...flags }) =>
    withOperations((operations) =>
      Effect.flatMap(operations.listKeys(account, Flags.pageRequest(flags)), (page) =>
        print(
          json,
          page,
          [
            page.keys.length === 0 ? `Account ${account} has no integration keys.` : page.keys.map(describeKey).join("\n"),
            ...Flags.moreLine(page.next_cursor, `crm-relay keys list --account ${account}`)
          ].join("\n")
        ))
    )
).pipe(
  Command.withDescription(
    "List an account's integration keys, oldest first. Each with its id, last four characters, created, last used (to the minute), disabled. Never the key."
  )
)

/** `keys list`. */
export const keyCommands = [listKeys] as const

const listSubscriptions = Command.make(
  "list",
  {
    account: account("subscriptions to list"),
    removed: Options.boolean("removed").pipe(Options.withDescription("List removed subscriptions too (when, and why: gone after a 410).")),
    limit: Flags.limit,
    cursor: Flags.cursor,
    json
  },
  ({ account, json, removed, ...flags }) =>
    withOperations((operations) =>
      Effect.flatMap(operations.listSubscriptions(account, Flags.pageRequest(flags), removed), (page) =>
        print(
          json,
          page,
          [
            `${page.count} of ${page.limit} subscriptions (MAX_SUBSCRIPTIONS_PER_ACCOUNT; disabled ones count).`,
            page.subscriptions.length === 0
              ? `Account ${account} has no active subscriptions.`
              : page.subscriptions.map(describeSubscription).join("\n"),
            ...Flags.moreLine(page.next_cursor, `crm-relay subscriptions list --account ${account}${removed ? " --removed" : ""}`)
          ].join("\n")
        ))
    )
).pipe(
  Command.withDescription(
    "List an account's active subscriptions (REST hooks), oldest first. It says how many of MAX_SUBSCRIPTIONS_PER_ACCOUNT the account has, then each with its id, event, receiver URL (query hidden), state (active, failing, disabled: when and why), created, creating key."
  )
)

const removeSubscription = Command.make(
  "remove",
  {
    account: account("subscription to remove"),
    id: Options.text("id").pipe(Options.withDescription("Id of the subscription to remove.")),
    json
  },
  ({ account, id, json }) =>
    withOperations((operations) =>
      Effect.zipRight(
        operations.removeSubscription(account, id),
        print(json, { id, removed: true }, `Removed subscription ${id}; it receives no more events.`)
      )
    )
).pipe(Command.withDescription("Remove an account's subscription, as DELETE /subscribe/{id} would: it receives no more events."))

/** `crm-relay subscriptions`. */
export const subscriptions = Command.make("subscriptions").pipe(
  Command.withDescription("See, remove, disable, enable and recover the REST-hook subscriptions of an account."),
  Command.withSubcommands([listSubscriptions, removeSubscription, ...lifecycleCommands])
)
