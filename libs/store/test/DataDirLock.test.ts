import { describe, expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as DataDirLock from "../src/DataDirLock.js"

const tempDir = Effect.acquireRelease(
  Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "crm-relay-lock-"))),
  (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)

describe("DataDirLock: the embedded database belongs to one process at a time", () => {
  it.scoped("a second acquisition while the first is held fails with DataDirInUse naming the holder", () =>
    Effect.gen(function*() {
      const dir = Path.join(yield* tempDir, "data")
      yield* DataDirLock.acquire(dir)
      expect(yield* DataDirLock.holder(dir)).toEqual(Option.some(process.pid))
      const error = yield* Effect.scoped(DataDirLock.acquire(dir)).pipe(Effect.flip)
      expect(error).toMatchObject({ _tag: "DataDirInUse", pid: process.pid })
      expect(error.message).toContain(`in use by process ${process.pid}`)
    }))

  it.scoped("releasing the scope frees the directory", () =>
    Effect.gen(function*() {
      const dir = Path.join(yield* tempDir, "data")
      yield* Effect.scoped(DataDirLock.acquire(dir))
      expect(yield* DataDirLock.holder(dir)).toEqual(Option.none())
      expect(Fs.existsSync(DataDirLock.lockPath(dir))).toBe(false)
    }))

  it.scoped("a lock left by a dead process (e.g. after SIGKILL) is taken over", () =>
    Effect.gen(function*() {
      const dir = Path.join(yield* tempDir, "data")
      // Pids are below 2^22 on Linux; this one cannot be alive.
      Fs.writeFileSync(DataDirLock.lockPath(dir), "4194399\n")
      expect(yield* DataDirLock.holder(dir)).toEqual(Option.none())
      yield* DataDirLock.acquire(dir)
      expect(yield* DataDirLock.holder(dir)).toEqual(Option.some(process.pid))
    }))
})
