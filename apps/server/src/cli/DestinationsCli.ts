/**
 * `crm-relay destinations create|list|show|remove|disable|enable|test`: an
 * account's event destinations (webhook, RabbitMQ, NATS JetStream…). Create
 * checks the destination through its kind before anything is stored and
 * prints the kind's sentence when it refuses; credentials are read from the
 * environment variable DESTINATION_CREDENTIALS (JSON), never from a flag, so
 * they stay out of shell history.
 */
import { Command, Options } from "@effect/cli"
import type { CreateDestinationRequest, DestinationView } from "@crm-relay/contract/Destinations"
import { type Context, Effect, Option } from "effect"
import { refused } from "./AdminError.js"
import type * as Operations from "./DestinationOperations.js"
import { json, print } from "./Output.js"

// Loaded when the command runs: help and the other commands never load the data access.
const withDestinations = <A, E>(f: (operations: Context.Tag.Service<typeof Operations.DestinationOperations>) => Effect.Effect<A, E>) =>
  Effect.flatMap(Effect.promise(() => import("./DestinationOperations.js")), (operations) => operations.withOperations(f))

const account = Options.text("account").pipe(Options.withDescription("Id of the account the destination belongs to."))
const id = Options.text("id").pipe(Options.withDescription("Id of the destination."))

/** A destination as one line (and its state). */
export const describe = (d: DestinationView): string =>
  [
    `${d.id}  ${d.kind}  ${d.name}  ${d.event}  ${d.state}`,
    ...(d.failing_since === null ? [] : [`    every attempt failed since ${d.failing_since}`]),
    ...(d.disabled_at === null ? [] : [`    disabled ${d.disabled_at}: ${d.disabled_reason ?? ""}`])
  ].join("\n")

const parseObject = (what: string, text: string) =>
  Effect.try({
    try: () => JSON.parse(text) as unknown,
    catch: () => refused(`${what} is not JSON; give an object, e.g. {"url":"amqps://broker.example:5671"}.`)
  }).pipe(Effect.flatMap((value) =>
    typeof value === "object" && value !== null && !Array.isArray(value)
      ? Effect.succeed(value as Record<string, unknown>)
      : Effect.fail(refused(`${what} must be a JSON object.`))
  ))

const credentialsFromEnv = Effect.suspend(() => {
  const text = process.env["DESTINATION_CREDENTIALS"]
  if (text === undefined || text === "") return Effect.succeed(Option.none<Record<string, string>>())
  return Effect.flatMap(parseObject("DESTINATION_CREDENTIALS", text), (value) =>
    Object.values(value).every((v) => typeof v === "string")
      ? Effect.succeed(Option.some(value as Record<string, string>))
      : Effect.fail(refused("DESTINATION_CREDENTIALS must be a JSON object of strings, e.g. {\"username\":\"relay\",\"password\":\"…\"}.")))
})

const create = Command.make(
  "create",
  {
    account,
    kind: Options.text("kind").pipe(Options.withDescription("The destination kind: webhook, rabbitmq or nats.")),
    name: Options.text("name").pipe(Options.withDescription("A name for people.")),
    event: Options.choice("event", ["lead", "booking", "all"]).pipe(
      Options.withDefault("all" as const),
      Options.withDescription("Which events it receives.")
    ),
    config: Options.text("config").pipe(Options.withDescription("The kind's configuration as JSON, e.g. {\"url\":\"https://hooks.example/in\"}.")),
    json
  },
  ({ account, config, event, json, kind, name }) =>
    Effect.gen(function*() {
      const parsed = yield* parseObject("--config", config)
      const credentials = yield* credentialsFromEnv
      const request: CreateDestinationRequest = {
        kind,
        name,
        event,
        config: parsed,
        ...(Option.isSome(credentials) ? { credentials: credentials.value } : {})
      }
      return yield* withDestinations((operations) =>
        Effect.flatMap(operations.create(account, request), (d) => print(json, d, `Created and checked destination:\n${describe(d)}`)))
    })
).pipe(Command.withDescription("Create a destination, checked first. It is connected and checked through its kind, and nothing is stored if it refuses. Credentials: DESTINATION_CREDENTIALS (JSON)."))

const list = Command.make("list", { account, json }, ({ account, json }) =>
  withDestinations((operations) =>
    Effect.flatMap(operations.list(account), (all) =>
      print(json, { items: all }, all.length === 0 ? "No destinations." : all.map(describe).join("\n"))))
).pipe(Command.withDescription("List an account's destinations and their state."))

const show = Command.make("show", { account, id, json }, ({ account, id, json }) =>
  withDestinations((operations) => Effect.flatMap(operations.show(account, id), (d) => print(json, d, describe(d))))
).pipe(Command.withDescription("Show one destination (never its credentials)."))

const remove = Command.make("remove", { account, id, json }, ({ account, id, json }) =>
  withDestinations((operations) =>
    Effect.flatMap(operations.remove(account, id), () => print(json, { id, removed: true }, `Removed destination ${id}.`)))
).pipe(Command.withDescription("Remove a destination. Nothing more is queued for it."))

const disable = Command.make(
  "disable",
  { account, id, reason: Options.text("reason").pipe(Options.optional, Options.withDescription("Why, shown to the account and the operator.")), json },
  ({ account, id, json, reason }) =>
    withDestinations((operations) =>
      Effect.flatMap(operations.disable(account, id, reason), (answer) =>
        print(json, answer, answer.outcome === "disabled" ? `Disabled destination ${id}.` : `Destination ${id} was already disabled.`)))
).pipe(Command.withDescription("Disable a destination. No new deliveries; pending ones end as disabled."))

const enable = Command.make("enable", { account, id, json }, ({ account, id, json }) =>
  withDestinations((operations) =>
    Effect.flatMap(operations.enable(account, id), (answer) =>
      print(json, answer, answer.outcome === "enabled" ? `Enabled destination ${id}.` : `Destination ${id} was already enabled.`)))
).pipe(Command.withDescription("Enable a disabled destination. New events are delivered again."))

const test = Command.make("test", { account, id, json }, ({ account, id, json }) =>
  withDestinations((operations) =>
    Effect.flatMap(operations.test(account, id), (sent) =>
      print(json, sent, `Queued test delivery ${sent.delivery_id}; follow it with: crm-relay deliveries list --account ${account}`)))
).pipe(Command.withDescription("Send a test event to a destination. It is delivered and logged like any other."))

/** `destinations create|list|show|remove|disable|enable|test`. */
export const command = Command.make("destinations").pipe(
  Command.withDescription("An account's event destinations (webhook, RabbitMQ, NATS JetStream): create (checked first), list, show, remove, disable, enable, test."),
  Command.withSubcommands([create, list, show, remove, disable, enable, test])
)
