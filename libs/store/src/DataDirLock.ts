/**
 * Exclusive ownership of an embedded database directory. PGlite is one
 * process's database: a second process opening the same files would corrupt
 * them, so the owner writes its pid into `<dataDir>.lock` and others refuse
 * (or, like the CLI, talk to the owner instead). A lock whose process is gone
 * (for example after SIGKILL) is taken over.
 */
import { Data, Effect, Option, type Scope } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"

/** The directory is held by another live process (or by this one already). */
export class DataDirInUse extends Data.TaggedError("DataDirInUse")<{
  readonly dataDir: string
  readonly pid: number
}> {
  override get message() {
    return `The embedded database in ${this.dataDir} is in use by process ${this.pid}.`
  }
}

/** The lock file of a data directory. */
export const lockPath = (dataDir: string): string => `${Path.resolve(dataDir)}.lock`

/** Whether process `pid` exists (EPERM: it does, under another user). */
export const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

const readPid = (file: string): Option.Option<number> => {
  try {
    const pid = Number.parseInt(Fs.readFileSync(file, "utf8").trim(), 10)
    return Number.isSafeInteger(pid) && pid > 0 ? Option.some(pid) : Option.none()
  } catch {
    return Option.none()
  }
}

/** The live process holding `dataDir`, if any. */
export const holder = (dataDir: string): Effect.Effect<Option.Option<number>> =>
  Effect.sync(() => Option.filter(readPid(lockPath(dataDir)), isAlive))

const tryCreate = (file: string): boolean => {
  try {
    Fs.writeFileSync(file, `${process.pid}\n`, { flag: "wx", mode: 0o600 })
    return true
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return false
    throw error
  }
}

/**
 * Takes the lock of `dataDir` for the scope, or fails with `DataDirInUse`.
 * A stale lock (dead pid, or unreadable) is removed and taken once.
 */
export const acquire = (dataDir: string): Effect.Effect<void, DataDirInUse, Scope.Scope> => {
  const file = lockPath(dataDir)
  const take = Effect.suspend((): Effect.Effect<void, DataDirInUse> => {
    Fs.mkdirSync(Path.dirname(file), { recursive: true })
    if (tryCreate(file)) return Effect.void
    const pid = readPid(file)
    if (Option.isSome(pid) && isAlive(pid.value)) return Effect.fail(new DataDirInUse({ dataDir, pid: pid.value }))
    Fs.rmSync(file, { force: true })
    if (tryCreate(file)) return Effect.void
    return Effect.fail(new DataDirInUse({ dataDir, pid: Option.getOrElse(readPid(file), () => 0) }))
  })
  const release = Effect.sync(() => {
    const pid = readPid(file)
    if (Option.isSome(pid) && pid.value === process.pid) Fs.rmSync(file, { force: true })
  })
  return Effect.acquireRelease(take, () => release)
}
