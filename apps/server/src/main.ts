/**
 * Entry point of the `crm-relay` binary: every command (bin/crm-relay.js
 * runs `crm-relay serve` alone from the `serve` entry point instead).
 */
import { Effect } from "effect"
import { type Failure, run } from "./Binary.js"

/**
 * The command line, parsed by @effect/cli (cli/Cli) — except `crm-relay
 * serve` alone: it takes no options, so it runs without loading the parser
 * and the other commands (2 to 4 % of the instructions of the server's
 * start-up). Anything else (`serve --help`, `serve x`) goes through the
 * parser as before.
 */
const program = (argv: ReadonlyArray<string>): Effect.Effect<void, Failure> =>
  argv.length === 3 && argv[2] === "serve"
    ? Effect.flatMap(Effect.promise(() => import("./cli/Serve.js")), (serve) => serve.serve)
    : Effect.flatMap(Effect.promise(() => import("./cli/Cli.js")), (cli) => cli.run(argv))

run(program(process.argv))
