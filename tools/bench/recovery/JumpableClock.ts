/**
 * A clock the recovery bench can jump for one server process: libfaketime
 * (Debian's `faketime` package) preloaded into the server, its offset read
 * from a file of its own that the bench rewrites. The offset moves
 * `Date.now()` and the monotonic clock Node's timers run on alike, so a jump
 * is, to the server, that much time passed at once: its timers that fell due
 * fire when its event loop next wakes (the bench then sends it a request).
 * The bench's own process is not faked: its virtual time is its real time
 * plus the offset it wrote.
 */
import { Data, Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

/** libfaketime did not move a Node process's clock; `message` says what was seen. */
export class NoFakeClock extends Data.TaggedError("NoFakeClock")<{ readonly message: string }> {}

/** How often, in seconds, the server re-reads its offset file (FAKETIME_CACHE_DURATION). */
const CACHE_SECONDS = 1

/**
 * A jump has taken effect in the server within this (the cache's second, counted in whole seconds, and
 * a margin): the bench lands a jump more than this before anything falls due, and waits this long after it.
 */
export const TAKES_EFFECT_MS = 2_500

/** Where Debian installs libfaketime's thread-safe build (Node runs several threads). */
const debianPath = () => {
  const triplet = Os.arch() === "arm64" ? "aarch64-linux-gnu" : "x86_64-linux-gnu"
  return [`/usr/lib/${triplet}/faketime/libfaketimeMT.so.1`, "/usr/lib/faketime/libfaketimeMT.so.1", "/usr/local/lib/faketime/libfaketimeMT.so.1"]
}

/** The libfaketime library: `explicit` if given, else the first of Debian's paths that exists. */
export const findLibrary = (explicit: string | undefined): string | undefined =>
  explicit ?? debianPath().find((path) => Fs.existsSync(path))

/** The environment that runs a process under `library` with its offset in `file`. */
const fakeEnv = (library: string, file: string): Record<string, string> => ({
  LD_PRELOAD: library,
  FAKETIME_TIMESTAMP_FILE: file,
  FAKETIME_CACHE_DURATION: String(CACHE_SECONDS),
  // File times stay real: only the clocks move.
  NO_FAKE_STAT: "1"
})

/** A clock for one server: its environment, the virtual time, and a jump. */
export interface JumpableClock {
  /** Whether `jumpTo` moves the server's clock (false: real time, `jumpTo` does nothing). */
  readonly jumps: boolean
  /** The server's environment for this clock. */
  readonly env: Record<string, string>
  /** The server's time now (epoch milliseconds): real time plus the offset. */
  readonly now: () => number
  /** Moves the server's clock forward to `at` (whole seconds); the server sees it within TAKES_EFFECT_MS. */
  readonly jumpTo: (at: number) => void
  /** How far the clock has been jumped, in milliseconds. */
  readonly jumpedMillis: () => number
}

/** Real time, for a run without libfaketime. */
export const realClock: JumpableClock = { jumps: false, env: {}, now: () => Date.now(), jumpTo: () => {}, jumpedMillis: () => 0 }

/** A clock for one server for the scope: its offset file in a temporary folder, at +0 to begin with. */
export const make = (library: string) =>
  Effect.gen(function*() {
    const dir = yield* Effect.acquireRelease(
      Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "crm-relay-clock-"))),
      (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
    )
    const file = Path.join(dir, "offset")
    Fs.writeFileSync(file, "+0\n")
    let offsetSeconds = 0
    return {
      jumps: true,
      env: fakeEnv(library, file),
      now: () => Date.now() + offsetSeconds * 1000,
      jumpTo: (at: number) => {
        const seconds = Math.floor((at - Date.now()) / 1000)
        if (seconds <= offsetSeconds) return
        offsetSeconds = seconds
        // Written whole and renamed: the server never reads half an offset.
        Fs.writeFileSync(`${file}.next`, `+${seconds}\n`)
        Fs.renameSync(`${file}.next`, file)
      },
      jumpedMillis: () => offsetSeconds * 1000
    } satisfies JumpableClock
  })

/** The check's child: jumps its own offset to +3600 s and answers how far both clocks moved over the next TAKES_EFFECT_MS. */
const CHECK_SCRIPT = `
const file = process.env.FAKETIME_TIMESTAMP_FILE
const date = Date.now(), monotonic = process.hrtime.bigint()
require("node:fs").writeFileSync(file, "+3600\\n")
setTimeout(() => process.stdout.write(JSON.stringify({
  date: (Date.now() - date) / 1000, monotonic: Number((process.hrtime.bigint() - monotonic) / 1000000n) / 1000
})), ${TAKES_EFFECT_MS})`

/**
 * Checks that `library` jumps a Node process's wall clock and the monotonic clock its timers run on:
 * a child of this Node that moves its own offset from +0 to +3600 s must see both move by an hour.
 */
export const check = (library: string) =>
  Effect.gen(function*() {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "crm-relay-clock-check-"))
    const file = Path.join(dir, "offset")
    Fs.writeFileSync(file, "+0\n")
    const result = yield* Effect.sync(() =>
      ChildProcess.spawnSync(process.execPath, ["-e", CHECK_SCRIPT], {
        env: { PATH: process.env["PATH"] ?? "", ...fakeEnv(library, file) },
        encoding: "utf8",
        timeout: 30_000
      })
    ).pipe(Effect.ensuring(Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))))
    const seen = /^\{.*\}$/.test(result.stdout ?? "") ? (JSON.parse(result.stdout) as { date: number; monotonic: number }) : undefined
    const moved = (s: number) => s > 3600 && s < 3700
    if (seen === undefined || !moved(seen.date) || !moved(seen.monotonic)) {
      return yield* new NoFakeClock({
        message: `${library} did not jump a Node process's clocks (a jump of +3600 s gave ${
          seen === undefined
            ? `no reading: ${(result.stderr ?? "").slice(0, 300)}`
            : `the wall clock ${seen.date.toFixed(0)} s, the monotonic clock ${seen.monotonic.toFixed(0)} s`
        }). Run with --real-time, or give --libfaketime PATH.`
      })
    }
  })
