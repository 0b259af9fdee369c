/**
 * `npm run docs` (also `npm run readme`): regenerates the configuration table
 * of docs/configuration.md from the settings the binary reads
 * (apps/server/src/config/Settings.ts).
 */
import { FileSystem, Path } from "@effect/platform"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import * as Settings from "@crm-relay/server/config/Settings"
import * as SettingsDoc from "@crm-relay/server/config/SettingsDoc"
import { Data, Effect } from "effect"

/** The page lost its markers: there is nowhere to write the table. */
class MarkersMissing extends Data.TaggedError("MarkersMissing")<{ readonly message: string }> {}

const program = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const page = path.join(import.meta.dirname, "..", "..", SettingsDoc.PAGE)
  const before = yield* fs.readFileString(page)
  if (!before.includes(SettingsDoc.BEGIN) || !before.includes(SettingsDoc.END)) return yield* new MarkersMissing({ message: `${SettingsDoc.PAGE} has lost the table's markers; put back ${SettingsDoc.BEGIN} and ${SettingsDoc.END} where the table goes` })
  const after = SettingsDoc.withTable(before, Settings.table)
  if (after === before) return yield* Effect.logInfo(`${SettingsDoc.PAGE} is up to date`)
  yield* fs.writeFileString(page, after)
  yield* Effect.logInfo(`${SettingsDoc.PAGE}: configuration table rewritten`)
})

NodeRuntime.runMain(program.pipe(Effect.provide(NodeContext.layer)))
