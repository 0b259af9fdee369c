/**
 * `npm run openapi`: writes the OpenAPI 3.1 documents from the HttpApi classes.
 */
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { FileSystem, Path } from "@effect/platform"
import { Effect } from "effect"
import { DOCUMENTS, render } from "../src/OpenApiDocuments.js"

const program = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const dir = path.join(import.meta.dirname, "..", "openapi")
  yield* fs.makeDirectory(dir, { recursive: true })
  for (const [file, make] of Object.entries(DOCUMENTS)) {
    const target = path.join(dir, file)
    yield* fs.writeFileString(target, render(make()))
    yield* Effect.logInfo(`wrote ${path.relative(process.cwd(), target)}`)
  }
})

NodeRuntime.runMain(program.pipe(Effect.provide(NodeContext.layer)))
