/**
 * `crm-relay serve`: reads the settings, bounds the heap, loads the server's
 * code (a chunk of the build of its own) and runs it until SIGTERM or SIGINT.
 *
 * It needs no command-line parser: `crm-relay serve` takes no options (all
 * of its configuration is in the environment), so `main` runs it directly
 * when it is the whole command line, and the parser (cli/Cli) only for
 * everything else, `serve --help` included.
 */
import { Effect, Layer } from "effect"
import * as CodeCache from "../config/CodeCache.js"
import * as DataDir from "../config/DataDir.js"
import * as Heap from "../config/Heap.js"
import * as Settings from "../config/Settings.js"
import * as Logging from "../observability/Logging.js"
import * as Tracing from "../observability/Tracing.js"

/** What `serve` says about itself in `crm-relay --help`. */
export const description = "Run the server and its workers, as ROLE says. The public Event API listens on PORT, the internal API on " +
  "ADMIN_HOST:ADMIN_PORT (Bearer ADMIN_TOKEN), the Integrations area on PORTAL_HOST:PORTAL_PORT. Migrates the database first. Stops cleanly on SIGTERM or SIGINT."

/**
 * A second after start (after the first requests a supervisor sends), in a
 * daemon fiber: saves the compiled code (when the binary asks for it), then
 * gives back the memory start-up left in the young generation. In this
 * order: that collection may drop compiled code V8 has not run lately.
 */
const afterStart: Effect.Effect<void> = Effect.zipRight(CodeCache.save, Heap.release).pipe(
  Effect.delay(Heap.delay),
  Effect.withSpan("serve.afterStart"),
  Effect.forkDaemon,
  Effect.asVoid
)

/** Serves until interrupted (SIGTERM, SIGINT); fails when the settings, the database or a listener does. */
export const serve = Effect.gen(function*() {
  const settings = yield* Settings.Settings
  yield* DataDir.ensureWritable(settings.dataDir)
  // Before the server's code loads: its start-up is the first burst of allocation.
  const heap = yield* Heap.bound(settings.heap)
  const Server = yield* Effect.promise(() => import("../http/Server.js"))
  const budget = Effect.logInfo("heap budget").pipe(
    Effect.annotateLogs({ heap_semi_space_mib: heap.semiSpaceMiB, heap_growth_percent: heap.growthPercent })
  )
  return yield* Effect.zipRight(budget, Layer.launch(Server.layer(settings).pipe(Layer.tap(() => afterStart)))).pipe(
    Effect.provide(Tracing.fromSettings(settings.tracing)),
    Effect.provide(Logging.layer(settings.logLevel, "stdout"))
  )
})
