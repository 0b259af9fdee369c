/**
 * `crm-relay connections set|test|list|show|remove` and `crm-relay master-key rotate`.
 *
 * Secrets on a command line land in shell history and process listings, so
 * the API key and the client secret can also come from the environment
 * (`CONNECTION_API_KEY`, `CONNECTION_CLIENT_SECRET`) or from standard input
 * (`--api-key -`, `--client-secret -`: the first line read).
 */
import { Command, Options } from "@effect/cli"
import type { Operations } from "@crm-relay/contract"
import { Config, type Context, Effect, Either, Option, Redacted } from "effect"
import { text } from "node:stream/consumers"
import { AdminError, refused } from "./AdminError.js"
import type { ConnectionRequest, ConnectionView } from "@crm-relay/contract/InternalApi/ConnectionsApi"
import * as Settings from "../config/Settings.js"
import type * as ConnectionOps from "./ConnectionOperations.js"
import * as Flags from "./Flags.js"
import { json, print } from "./Output.js"
import * as Progress from "./Progress.js"

/** Environment variables that may hold the secret inputs of `connections set`. */
export const SECRET_ENV = { apiKey: "CONNECTION_API_KEY", clientSecret: "CONNECTION_CLIENT_SECRET" } as const

// Loaded when the command runs: help and the other commands never load the data access.
const withOperations = <A, E>(
  f: (operations: Context.Tag.Service<typeof ConnectionOps.ConnectionOperations>) => Effect.Effect<A, E>
) => Effect.flatMap(Effect.promise(() => import("./ConnectionOperations.js")), (operations) => operations.withOperations(f))

/** The first line of standard input (for `-`). */
const stdinLine = Effect.tryPromise({
  try: () => text(process.stdin),
  catch: () => new AdminError({ message: "Could not read the secret from standard input." })
}).pipe(Effect.map((input) => Redacted.make(input.split(/\r?\n/)[0]?.trim() ?? "")))

/** A secret from its flag (`-`: standard input), else from the environment (also used by `bridge check`). */
export const secretFrom = (flag: Option.Option<Redacted.Redacted<string>>, env: string) =>
  Option.match(flag, {
    onSome: (value) => (Redacted.value(value) === "-" ? Effect.map(stdinLine, Option.some) : Effect.succeed(Option.some(value))),
    onNone: () =>
      Config.option(Config.redacted(env)).pipe(
        Effect.map(Option.filter((value) => Redacted.value(value) !== "")),
        Effect.orElseSucceed(() => Option.none<Redacted.Redacted<string>>())
      )
  })

const describe = (capabilities: Operations.CapabilitiesResponse) =>
  `operations: ${capabilities.operations.join(", ")}; booking closes availability: ${capabilities.booking_closes_availability}`

const account = Options.text("account").pipe(Options.withDescription("Id of the account (a live account: demo and sandbox accounts cannot connect)."))
const tenant = Options.text("tenant").pipe(Options.withDescription("Id of the client tenant, as the bridge knows it (tenant_id)."))

const set = Command.make(
  "set",
  {
    account,
    tenant,
    transport: Options.choice("transport", ["rest", "mcp"]).pipe(
      Options.withDescription("rest: HTTPS POST per operation under --url; mcp: the MCP tools at --url.")
    ),
    url: Options.text("url").pipe(
      Options.withDescription("The bridge's HTTPS address: {bridge_base_url} for REST, the full {mcp_url} for MCP; no query, fragment or credentials.")
    ),
    apiKey: Options.redacted("api-key").pipe(
      Options.optional,
      Options.withDescription(
        `API key sent as Bearer. "-" reads it from standard input; without the flag, ${SECRET_ENV.apiKey} is used (keeps it out of shell history).`
      )
    ),
    tokenUrl: Options.text("token-url").pipe(Options.optional, Options.withDescription("OAuth 2.0 client credentials: the HTTPS token URL.")),
    clientId: Options.text("client-id").pipe(Options.optional, Options.withDescription("OAuth 2.0 client credentials: the client id.")),
    clientSecret: Options.redacted("client-secret").pipe(
      Options.optional,
      Options.withDescription(
        `OAuth 2.0 client credentials: the client secret. "-" reads it from standard input; without the flag, ${SECRET_ENV.clientSecret} is used.`
      )
    ),
    scope: Options.text("scope").pipe(Options.optional, Options.withDescription("OAuth 2.0: the scope to request, when the token endpoint needs one.")),
    json
  },
  (input) =>
    Effect.gen(function*() {
      const oauth = Option.isSome(input.tokenUrl) || Option.isSome(input.clientId)
      if (oauth && Option.isSome(input.apiKey)) {
        return yield* refused("Give either --api-key or OAuth client credentials (--token-url, --client-id, --client-secret), not both.")
      }
      let auth: ConnectionRequest["auth"]
      if (oauth) {
        const secret = yield* secretFrom(input.clientSecret, SECRET_ENV.clientSecret)
        if (Option.isNone(input.tokenUrl) || Option.isNone(input.clientId) || Option.isNone(secret)) {
          return yield* refused(
            `OAuth client credentials need --token-url, --client-id and --client-secret (or ${SECRET_ENV.clientSecret}).`
          )
        }
        auth = {
          type: "oauth",
          token_url: input.tokenUrl.value,
          client_id: input.clientId.value,
          client_secret: secret.value,
          ...(Option.isSome(input.scope) ? { scope: input.scope.value } : {})
        }
      } else {
        const key = yield* secretFrom(input.apiKey, SECRET_ENV.apiKey)
        if (Option.isNone(key)) {
          return yield* refused(
            `Give --api-key (or ${SECRET_ENV.apiKey}, or --api-key - to read it from standard input), ` +
              "or OAuth client credentials: --token-url, --client-id and --client-secret."
          )
        }
        auth = { type: "api_key", key: key.value }
      }
      const request: ConnectionRequest = { transport: input.transport, url: input.url, auth }
      return yield* withOperations((operations) =>
        Effect.flatMap(operations.set(input.account, input.tenant, request), (capabilities) =>
          print(
            input.json,
            { capabilities },
            `Connected tenant ${input.tenant} of account ${input.account} over ${input.transport}: the capabilities check passed (${
              describe(capabilities)
            }). Nothing was written at the bridge.`
          ))
      )
    })
).pipe(
  Command.withDescription(
    "Connect a client tenant's CRM bridge after a capabilities check. The check is the only exchange (nothing is written at " +
      "the bridge); when it passes, crm-relay stores the connection (the secret encrypted) and the capabilities. A failed check stores nothing."
  )
)

const test = Command.make("test", { account, tenant, json }, ({ account, json, tenant }) =>
  withOperations((operations) =>
    Effect.flatMap(operations.test(account, tenant), (capabilities) =>
      print(
        json,
        { capabilities },
        `The capabilities check of tenant ${tenant} of account ${account} passed (${describe(capabilities)}); stored.`
      ))
  )).pipe(
    Command.withDescription("Run the capabilities check again on a tenant's stored connection and store what the bridge answers.")
  )

/** A connection as text: never the secret, only its kind. */
const describeConnection = (c: ConnectionView) =>
  [
    `${c.tenant_id}  ${c.transport}  ${c.url}`,
    `    credential: ${c.auth.type === "api_key" ? "API key" : `OAuth client ${c.auth.client_id} at ${c.auth.token_url}`}` +
    `  version ${c.version}  last check ${c.checked_at}`,
    `    ${describe(c.capabilities)}`
  ].join("\n")

const list = Command.make(
  "list",
  { account, limit: Flags.limit, cursor: Flags.cursor, json },
  ({ account, json, ...flags }) =>
    withOperations((operations) =>
      Effect.flatMap(operations.list(account, Flags.pageRequest(flags)), (page) =>
        print(
          json,
          page,
          [
            page.connections.length === 0
              ? `Account ${account} has no bridge connections.`
              : page.connections.map(describeConnection).join("\n"),
            ...Flags.moreLine(page.next_cursor, `crm-relay connections list --account ${account}`)
          ].join("\n")
        ))
    )
).pipe(
  Command.withDescription(
    "List an account's bridge connections by tenant, never the secret. Each with its transport, URL, credential kind, capabilities and last check."
  )
)

const show = Command.make("show", { account, tenant, json }, ({ account, json, tenant }) =>
  withOperations((operations) =>
    Effect.flatMap(operations.show(account, tenant), (connection) => print(json, connection, describeConnection(connection)))
  )).pipe(
    Command.withDescription("Show one tenant's bridge connection, never the secret. Its transport, URL, credential kind, capabilities and last check.")
  )

const remove = Command.make("remove", { account, tenant, json }, ({ account, json, tenant }) =>
  withOperations((operations) =>
    Effect.zipRight(
      operations.remove(account, tenant),
      print(
        json,
        { account_id: account, tenant_id: tenant, removed: true },
        `Removed the bridge connection of tenant ${tenant}; its secret is deleted and its calls reach no CRM until it is set again.`
      )
    )
  )).pipe(
    Command.withDescription("Remove a tenant's bridge connection and delete its stored secret; push jobs then stop as not configured.")
  )

/** `crm-relay connections`. */
export const connections = Command.make("connections").pipe(
  Command.withDescription("Connect, list and remove client tenants' CRM bridges."),
  Command.withSubcommands([set, test, list, show, remove])
)

/**
 * The master key the operator asks to rotate under: MASTER_KEY's id when
 * set. A malformed MASTER_KEY or MASTER_KEY_PREVIOUS is refused before
 * anything runs, whichever way the command reaches the data.
 */
const askedMasterKey = Effect.gen(function*() {
  const settings = yield* Settings.CliSettings
  // Loaded here, not at start: the Vault module brings the SQL client with it.
  const Vault = yield* Effect.promise(() => import("@crm-relay/store/Vault"))
  const parse = (text: Redacted.Redacted<string>, name: string) =>
    Either.match(Vault.parseMasterKey(text, name), {
      onLeft: (message) => Effect.fail(refused(message)),
      onRight: (key) => Effect.succeed(key.id)
    })
  if (Option.isSome(settings.masterKeyPrevious)) {
    const previous = Redacted.value(settings.masterKeyPrevious.value).split(",").map((s) => s.trim()).filter((s) => s !== "")
    yield* Effect.forEach(previous, (text) => parse(Redacted.make(text), "Each key of MASTER_KEY_PREVIOUS"))
  }
  return Option.isSome(settings.masterKey)
    ? Option.some(yield* parse(settings.masterKey.value, "MASTER_KEY"))
    : Option.none<string>()
})

const rotate = Command.make("rotate", { json }, ({ json }) =>
  withOperations((operations) =>
    Effect.gen(function*() {
      const mode = Progress.mode(json)
      let previous = 0
      const report = yield* Effect.flatMap(askedMasterKey, (masterKeyId) =>
        operations.rotate(masterKeyId, (done, total) =>
          Effect.suspend(() => {
            const advanced = done - previous
            previous = done
            return Progress.report(mode, "Re-encrypting secrets", done, total, advanced)
          })))
      yield* print(
        json,
        report,
        `Rotated: new data key ${report.key_id} (wrapped under master key ${report.master_key_id}); ` +
          `re-encrypted ${report.resealed} secret(s); deleted ${report.deleted_keys.length} unused data key(s).`
      )
      if (report.undecryptable.length > 0) {
        return yield* new AdminError({
          message: `${report.undecryptable.length} stored secret(s) did not authenticate and keep their old key: ${
            report.undecryptable.join(", ")
          }. They were altered or moved; set those connections again.`
        })
      }
    })
  )).pipe(
    Command.withDescription(
      "Re-encrypt every stored secret (bridge credentials, webhook signing secrets) under a new data key while the service " +
        "keeps running, with a progress bar on a terminal and a final count. To change MASTER_KEY: run it with the new MASTER_KEY and MASTER_KEY_PREVIOUS=<old key>, restart every " +
        "replica with the new MASTER_KEY, then run it again with the new key only. When a running server holds the embedded " +
        "database, that server rotates; a MASTER_KEY given here must be the server's own, or nothing is changed and the command says why."
    )
  )

/** `crm-relay master-key`. */
export const masterKey = Command.make("master-key").pipe(
  Command.withDescription("Manage the key that encrypts secrets at rest."),
  Command.withSubcommands([rotate])
)
