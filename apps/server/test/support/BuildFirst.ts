/**
 * Vitest global setup: the tests run the `crm-relay` binary, which runs the
 * build in dist/. Under Nx the test target depends on the build; run on its
 * own (`npx vitest run ...`) this builds through Nx first (cached when the
 * sources are unchanged), so a test never runs a bundle older than the sources.
 */
import { execFileSync } from "node:child_process"
import { join } from "node:path"

export default function setup(): void {
  if (process.env["NX_TASK_TARGET_PROJECT"] === "@crm-relay/server" && process.env["NX_TASK_TARGET_TARGET"] === "test") return
  const root = join(import.meta.dirname, "..", "..", "..", "..")
  execFileSync(process.execPath, [join(root, "node_modules", ".bin", "nx"), "run", "@crm-relay/server:build", "--outputStyle=stream"], {
    cwd: root,
    stdio: "inherit"
  })
}
