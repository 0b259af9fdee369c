/**
 * `npm run readme`: regenerates the configuration table of README.md from
 * the settings the binary reads (apps/server/src/config/Settings.ts).
 */
import { FileSystem, Path } from "@effect/platform"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import * as Settings from "@crm-relay/server/config/Settings"
import * as SettingsDoc from "@crm-relay/server/config/SettingsDoc"
import { Effect } from "effect"

const program = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const readme = path.join(import.meta.dirname, "..", "..", "README.md")
  const before = yield* fs.readFileString(readme)
  const after = SettingsDoc.withTable(before, Settings.table)
  if (after === before) return yield* Effect.logInfo("README.md is up to date")
  yield* fs.writeFileString(readme, after)
  yield* Effect.logInfo("README.md configuration table rewritten")
})

NodeRuntime.runMain(program.pipe(Effect.provide(NodeContext.layer)))
