/**
 * The `crm-relay` command line. Every command reads its configuration from
 * the environment (see Settings) and works whether or not a server is
 * running: see cli/DataAccess for how it reaches the data.
 */
import { Command, Options, ValidationError } from "@effect/cli"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Console, type Context, Effect, Option, Redacted } from "effect"
import * as Executable from "../Executable.js"
import type * as Admin from "./AdminOperations.js"
import * as AccountsCli from "./AccountsCli.js"
import * as BridgeCli from "./BridgeCli.js"
import * as ConnectionsCli from "./ConnectionsCli.js"
import * as DataCli from "./DataCli.js"
import * as DeliveriesCli from "./DeliveriesCli.js"
import * as DestinationsCli from "./DestinationsCli.js"
import { refused, UsageError } from "./AdminError.js"
import * as Help from "./Help.js"
import { json, print } from "./Output.js"
import * as PortalCli from "./PortalCli.js"
import * as PushesCli from "./PushesCli.js"
import * as Serve from "./Serve.js"

// A command loads its code when it runs (a chunk of the build of its own): `--help` loads no
// database driver and no HTTP stack, and a CLI command no server.
const withOperations = <A, E>(f: (operations: Context.Tag.Service<typeof Admin.AdminOperations>) => Effect.Effect<A, E>) =>
  Effect.flatMap(Effect.promise(() => import("./AdminOperations.js")), (admin) => admin.withOperations(f))

const serve = Command.make("serve", {}, () => Serve.serve).pipe(Command.withDescription(Serve.description))

const status = Options.boolean("status").pipe(
  Options.withDescription("Only list the applied migrations, the pending ones and any this build does not know; change nothing.")
)

const migrate = Command.make("migrate", { json, status }, ({ json, status }) =>
  status
    ? Effect.flatMap(Effect.promise(() => import("./MigrationStatus.js")), (migrations) =>
      migrations.withStatus((operations) =>
        Effect.flatMap(operations.status, (found) => print(json, found, migrations.render(found)))
      ))
    : withOperations((operations) =>
    Effect.flatMap(operations.migrate, (applied) =>
      print(
        json,
        { applied: applied.map(([id, name]) => ({ id, name })) },
        applied.length === 0
          ? "The database is up to date."
          : `Applied ${applied.length} migration(s): ${applied.map(([id, name]) => `${id}_${name}`).join(", ")}.`
      ))
  )).pipe(
    Command.withDescription(
      "Apply pending database migrations. Forward-only, each in its own transaction; `serve` does this at start too."
    )
  )

const accountsCreate = Command.make(
  "create",
  {
    name: Options.text("name").pipe(Options.withDescription("Display name of the account (1 to 200 characters).")),
    mode: Options.choice("mode", ["live", "demo", "sandbox"]).pipe(
      Options.withDefault("live" as const),
      Options.withDescription("live: calls reach the customer's CRM; demo and sandbox: never.")
    ),
    json
  },
  ({ json, mode, name }) =>
    withOperations((operations) =>
      Effect.flatMap(operations.createAccount({ name, mode }), (account) =>
        print(json, account, `Created account ${account.id} (name: ${account.name}, mode: ${account.mode}).`))
    )
).pipe(Command.withDescription("Create an account and print its id."))

const accounts = Command.make("accounts").pipe(
  Command.withDescription("Manage accounts."),
  Command.withSubcommands([accountsCreate, ...AccountsCli.accountCommands])
)

const keysCreate = Command.make(
  "create",
  { account: Options.text("account").pipe(Options.withDescription("Id of the account the key belongs to.")), json },
  ({ account, json }) =>
    withOperations((operations) =>
      Effect.flatMap(operations.createKey(account), (created) =>
        print(
          json,
          { id: created.id, key: Redacted.value(created.key) },
          `Created integration key ${created.id} for account ${account}.\n` +
            `Key (shown only now; keep it in a server-side secret store): ${Redacted.value(created.key)}`
        ))
    )
).pipe(Command.withDescription("Create an integration key for an account and print it (the only time it is shown)."))

const keysDisable = Command.make(
  "disable",
  { key: Options.text("key").pipe(Options.withDescription("Id of the integration key to turn off.")), json },
  ({ json, key }) =>
    withOperations((operations) =>
      Effect.zipRight(
        operations.disableKey(key),
        print(json, { id: key, disabled: true }, `Disabled integration key ${key}; the account's subscriptions stay.`)
      )
    )
).pipe(Command.withDescription("Turn an integration key off: it gets 401 from now on; subscriptions stay."))

const keys = Command.make("keys").pipe(
  Command.withDescription("Manage integration keys."),
  Command.withSubcommands([keysCreate, keysDisable, ...AccountsCli.keyCommands])
)

const root = Command.make("crm-relay", {}, () => Console.log("Run `crm-relay --help` to see the commands.")).pipe(
  Command.withDescription(
    "CRM bridge client and public Event API of the call-handling service. " +
      "Configuration comes from environment variables (PORT, ADMIN_PORT, ADMIN_HOST, ADMIN_TOKEN, DATABASE_URL, DATA_DIR, ROLE, LOG_LEVEL, ...)."
  ),
  // One line per command group.
  Command.withSubcommands([
    serve,
    migrate,
    DataCli.command,
    accounts,
    keys,
    AccountsCli.subscriptions,
    ConnectionsCli.connections,
    BridgeCli.command,
    ConnectionsCli.masterKey,
    PushesCli.command,
    DeliveriesCli.command,
    DestinationsCli.command,
    PortalCli.command
  ])
)

/** The command tree, as `crm-relay help` shows it. */
export const commands: Help.Node = Help.tree(root)

const runCommand = Command.run(root, { name: "crm-relay", version: Executable.versionLine() })

/**
 * Runs the CLI on `argv` (as `process.argv`). Help (`--help`, `-h`, `help
 * <command...>`, a group named alone) is rendered by cli/Help, the same
 * text for every form; a word that names no command is refused (exit 2)
 * with the commands there are.
 */
export const run = (argv: ReadonlyArray<string>) => {
  const request = Help.resolve(commands, argv.slice(2))
  switch (request._tag) {
    case "Run":
      return runCommand(argv).pipe(
        Effect.catchIf(ValidationError.isValidationError, (cause) => Effect.fail(new UsageError({ cause }))),
        Effect.provide(NodeContext.layer)
      )
    case "Unknown":
      return Effect.fail(refused(Help.unknown(commands, request.path, request.word)))
    case "Help":
      return Option.match(Help.find(commands, request.path), {
        onNone: () => Effect.fail(refused(Help.unknown(commands, request.path.slice(0, -1), request.path.at(-1) ?? ""))),
        onSome: (node) => Console.log(Help.render(commands, request.path, node, Help.style()))
      })
  }
}
