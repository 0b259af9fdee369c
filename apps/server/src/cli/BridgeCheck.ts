/**
 * What `crm-relay bridge check` runs, loaded only when the command runs: the
 * conformance check against a bridge given on the command line (this
 * process's egress, from EGRESS_ALLOW_PRIVATE and NODE_EXTRA_CA_CERTS), or
 * on a tenant's stored connection (through ConnectionOperations: directly on
 * the database, or through the running server's internal API).
 */
import { Conformance, ConformanceReport, Egress, TokenCache, TransportRegistry } from "@crm-relay/bridge"
import type { Conformance as Contract } from "@crm-relay/contract"
import { FileSystem } from "@effect/platform"
import { Console, Effect, Layer } from "effect"
import { AdminError, refused } from "./AdminError.js"
import * as Logging from "../observability/Logging.js"
import * as Settings from "../config/Settings.js"

// The stored-connection mode's data access (and the form's flag names) load only when used.
const connectionOperations = Effect.promise(() => import("./ConnectionOperations.js"))

/** The bridge side of a one-off check: egress configured from the environment, a token cache, REST and MCP. */
const bridgeSide = Layer.mergeAll(TokenCache.Default, TransportRegistry.Default).pipe(Layer.provideMerge(Egress.Default))

/** Runs the check on `options` with this process's egress. */
export const direct = (options: Conformance.Options): Effect.Effect<Contract.Report, AdminError> =>
  Effect.gen(function*() {
    const settings = yield* Settings.CliSettings
    return yield* Conformance.run(options).pipe(
      Effect.catchTag("InvalidConnection", (error) =>
        Effect.flatMap(connectionOperations, ({ FLAGS }) => Effect.fail(refused(`${FLAGS[error.field] ?? error.field}: ${error.message}`)))),
      Effect.provide(bridgeSide),
      Effect.provide(Logging.layer(settings.logLevel, "stderr"))
    )
  }).pipe(
    // EGRESS_ALLOW_PRIVATE (or another setting) did not parse.
    Effect.mapError((error) => (error instanceof AdminError ? error : refused(`Invalid configuration: ${String(error)}`)))
  )

/** Runs the check on the tenant's stored connection. */
export const stored = (accountId: string, tenantId: string, writes: boolean) =>
  Effect.flatMap(connectionOperations, ({ withOperations }) => withOperations((operations) => operations.check(accountId, tenantId, writes)))

/**
 * Prints the report (text, or JSON with `--json`), writes JUnit XML to
 * `junit` when asked, and fails (exit 1) when the requested level was not earned.
 */
export const publish = (
  report: Contract.Report,
  output: { readonly json: boolean; readonly junit: string | undefined; readonly verbose: boolean }
) =>
  Effect.gen(function*() {
    yield* Console.log(output.json ? JSON.stringify(report) : ConformanceReport.text(report, { verbose: output.verbose }))
    if (output.junit !== undefined) {
      const fs = yield* FileSystem.FileSystem
      yield* fs.writeFileString(output.junit, ConformanceReport.junit(report)).pipe(
        Effect.mapError((error) => new AdminError({ message: `Could not write the JUnit report to ${output.junit}: ${error.message}` }))
      )
    }
    if (!report.passed) {
      return yield* new AdminError({
        message: `The bridge did not pass the ${report.requested_level} level: ${report.counts.fail} check(s) failed ` +
          "(each FAIL above names the rule and a hint to fix it)."
      })
    }
  })
