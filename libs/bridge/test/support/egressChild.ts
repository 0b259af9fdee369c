/**
 * A child process that sends one POST through `Egress.Default` (config from
 * the environment, the system resolver, Node's CA store including
 * NODE_EXTRA_CA_CERTS) and prints the outcome as one JSON line.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect } from "effect"
import { Egress } from "../../src/Egress.js"

const url = process.argv[2] ?? ""

const program = Effect.flatMap(Egress, (egress) => egress.send({ method: "POST", url, body: "{}" })).pipe(
  Effect.match({
    onFailure: (error) => ({ ok: false, tag: error._tag, message: error.message }),
    onSuccess: (response) => ({ ok: true, status: response.status })
  }),
  Effect.flatMap((outcome) => Console.log(JSON.stringify(outcome))),
  Effect.provide(Egress.Default)
)

NodeRuntime.runMain(program)
