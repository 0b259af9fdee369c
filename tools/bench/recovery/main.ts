/**
 * Back in seconds (issue 40): how long a receiver that was down waits for
 * its events once it is back, and how often it was asked while down. The
 * real `crm-relay serve` binary (ROLE all) of this checkout and, with
 * `--baseline`, another checkout's, each on its own fresh database (the
 * embedded one in a fresh DATA_DIR; with DATABASE_URL, a fresh schema of
 * that PostgreSQL, dropped at the end).
 *
 *   npm run bench:recovery -- [--outage 60,600] [--events 1000] [--rounds 1] [--baseline PATH] [--bin PATH]
 *     [--real-time] [--libfaketime PATH] [--concurrency 8] [--server-log FILE]
 *
 * One trial: a server, one live account with one lead subscription to a
 * loopback HTTPS receiver, which then answers 503 for `--outage` seconds
 * (repeatable, or a comma-separated list) and 204 after. `--events` call
 * outcomes are posted through the internal API spread evenly over the
 * outage (each one webhook delivery). Measured: the seconds from the
 * receiver's return to the last first arrival (and to half of them), the
 * requests it answered 503 while down, all requests, and duplicates (a
 * webhook-id that arrived twice; expected 0). Each round runs every outage
 * for each build, which goes first alternating; then the medians and the
 * ratios of this checkout's figures to the baseline's.
 *
 * The clock. Without help the baseline's retry schedule (5 s, 5 min, 30 min,
 * 2 h, ±20 %) would keep a 10-minute outage's run going for real hours. The
 * server runs under libfaketime (Debian: `apt-get install faketime`; found
 * at Debian's path, or `--libfaketime PATH`), checked at the start to move a
 * Node process's wall and monotonic clocks. The bench jumps the server's
 * clock only across quiet stretches: no outcome left to post and the
 * outage's end more than 5 s away, no request at the receiver for 1 s, and
 * no delivery due (read through the internal API: each pending delivery's
 * next attempt, or its held origin's next try) for more than 5 s; it lands
 * 3 s before the earliest of those, so the server has read its new offset
 * (libfaketime re-reads it every second) before anything falls due. Whatever the server does
 * happens at its own pace in real time; only waits in which it would do
 * nothing are skipped, the same rule for both builds, and the figures are
 * on the server's clock. What a jump covers: everything the server times
 * with its own clock — the delivery claim's `p_at`, next attempts and held
 * origins' probes (stored from the app's clock and compared with it), its
 * timers and timeouts, and the embedded database, which runs inside the
 * server process. What it does not: PostgreSQL's own `now()` (with
 * DATABASE_URL), which stamps only bookkeeping columns (a key's last use,
 * an outcome's fan-out time, removals) and decides no delivery's timing. A
 * delivery cannot be in flight across a jump (one due within 5 s forbids
 * it), so no request times out by a jump. `--real-time`, or no libfaketime,
 * runs on the real clock alone; the outages default to 60 s then (a 600 s
 * one against the 5 min/30 min schedule takes real hours), and 60 s and
 * 600 s with the clock.
 */
import { Console, Duration, Effect, Redacted } from "effect"
import { randomBytes } from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Argv from "../support/Argv.js"
import { freshSchema } from "../support/BenchDatabase.js"
import { jsonClient, type JsonRequest } from "../support/Http.js"
import * as LoopbackRun from "../support/LoopbackRun.js"
import { leadOutcome, percentile } from "../support/Receiver.js"
import { runMain } from "../support/runMain.js"
import { BIN, builtBinary, type RunningServer, serve } from "../support/ServerProcess.js"
import * as JumpableClock from "./JumpableClock.js"
import * as OutageReceiver from "./OutageReceiver.js"

/** Every `--outage` value (repeatable, each a comma-separated list) as whole seconds; exits with a sentence otherwise. */
const outagesOf = (fallback: string) => {
  const given = process.argv.flatMap((arg, i) => (arg === "--outage" && i + 1 < process.argv.length ? [process.argv[i + 1]!] : []))
  const text = given.length === 0 ? fallback : given.join(",")
  const list = [...new Set(text.split(",").map(Number))]
  if (list.some((n) => !Number.isInteger(n) || n < 1)) {
    process.stderr.write(`--outage is a number of seconds (repeatable, or a comma-separated list), not ${JSON.stringify(text)}.\n`)
    process.exit(2)
  }
  return list
}

const events = Argv.integer("events", 1_000)
const rounds = Argv.integer("rounds", 1)
const concurrency = Argv.integer("concurrency", 8)
const serverLog = Argv.text("server-log")
const library = Argv.flag("real-time") ? undefined : JumpableClock.findLibrary(Argv.text("libfaketime"))
const outages = outagesOf(library === undefined ? "60" : "60,600")
const databaseUrl = process.env["DATABASE_URL"]

/** The clock jumps only when nothing happens for longer than this. */
const QUIET_MS = 5_000
/** A jump lands this long before the next thing due, so the server has read its new offset by then. */
const LEAD_MS = JumpableClock.TAKES_EFFECT_MS + 500

/** A build under test: this checkout's (`product`) or another's (`baseline`). */
interface Build {
  readonly name: "product" | "baseline"
  readonly bin: string
}

/** One trial's figures (seconds on the server's clock). */
interface Result {
  /** Return → last first arrival; NaN when not all arrived. */
  readonly lastS: number
  /** Return → half of the events arrived. */
  readonly halfS: number
  readonly arrived: number
  readonly whileDown: number
  readonly total: number
  readonly duplicates: number
  readonly jumpedS: number
  readonly realS: number
}

/** The earliest time a pending delivery of the account is due (its held origin's next try, if later); undefined: none pending. */
const earliestDue = (call: JsonRequest, server: RunningServer, adminToken: string, accountId: string) =>
  Effect.gen(function*() {
    let earliest: number | undefined
    let cursor: string | null = null
    do {
      const page: Record<string, unknown> = yield* call(
        "GET",
        `${server.adminUrl}/v1/accounts/${accountId}/deliveries?limit=200${cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`}`,
        adminToken
      )
      const list = Array.isArray(page["deliveries"]) ? (page["deliveries"] as ReadonlyArray<Record<string, unknown>>) : []
      for (const d of list) {
        if (d["status"] !== "pending") continue
        const next = typeof d["next_attempt_at"] === "string" ? Date.parse(d["next_attempt_at"]) : 0
        const held = d["held"] as { next_try_at?: string } | null | undefined
        const due = Math.max(next, typeof held?.next_try_at === "string" ? Date.parse(held.next_try_at) : 0)
        earliest = earliest === undefined ? due : Math.min(earliest, due)
      }
      cursor = typeof page["next_cursor"] === "string" ? page["next_cursor"] : null
    } while (cursor !== null)
    return earliest
  })

const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted.length === 0 ? Number.NaN : percentile(sorted, 50)
}

const seconds = (value: number) => (Number.isNaN(value) ? "—" : value < 100 ? value.toFixed(1) : value.toFixed(0))

const main = Effect.gen(function*() {
  const builds: Array<Build> = [{ name: "product", bin: yield* builtBinary(Argv.text("bin") ?? BIN) }]
  const baselineBin = Argv.text("baseline")
  if (baselineBin !== undefined) builds.push({ name: "baseline", bin: yield* builtBinary(baselineBin) })
  if (library !== undefined) yield* JumpableClock.check(library)
  const { serverEnv, tls } = yield* LoopbackRun.loopbackEgress("bench-recovery")
  const call = yield* jsonClient(Math.max(16, concurrency))
  const adminToken = randomBytes(24).toString("hex")
  const masterKey = randomBytes(32).toString("base64")
  yield* Console.log(
    `recovery: ${events} events spread over each outage of ${outages.map((s) => `${s} s`).join(", ")}; ${rounds} round${rounds === 1 ? "" : "s"}; ${
      databaseUrl === undefined ? "embedded database (PGlite)" : "PostgreSQL (a fresh schema per trial)"
    }; clock: ${library === undefined ? "real time" : "the server's jumped across quiet stretches (libfaketime)"}; builds: ${
      builds.map((b) => `${b.name} ${b.bin}`).join(", ")
    }; ${Os.cpus().length} CPUs; load average ${LoopbackRun.loadAverage()}`
  )

  /** One build, one outage: a fresh server and receiver, the outage, its events, and the wait until all arrived. */
  const trial = (build: Build, outageS: number, prefix: string) =>
    Effect.scoped(Effect.gen(function*() {
      const clock = library === undefined ? JumpableClock.realClock : yield* JumpableClock.make(library)
      const fresh = databaseUrl === undefined ? undefined : yield* freshSchema(Redacted.make(databaseUrl))
      const server = yield* serve({
        bin: build.bin,
        databaseUrl: fresh?.url,
        pool: 10,
        adminToken,
        masterKey,
        cpuProfileDir: undefined,
        stdout: serverLog === undefined ? "ignore" : Fs.openSync(serverLog, "a"),
        logLevel: serverLog === undefined ? "Warning" : "Info",
        env: { ROLE: "all", ...serverEnv, ...clock.env },
        stopWithin: "30 seconds"
      })
      const receiver = yield* OutageReceiver.start(tls, clock.now)
      const account = yield* LoopbackRun.liveAccount(call, server, adminToken, `recovery ${build.name}`)
      yield* LoopbackRun.subscribeLeads(call, server, account.key, receiver.url)

      const realStart = performance.now()
      const from = clock.now()
      receiver.outage.from = from
      receiver.outage.until = from + outageS * 1000
      const gapMs = (outageS * 1000) / events
      const posting = { done: 0 }
      const body = leadOutcome(account.id)
      const post = Effect.forEach(
        Array.from({ length: events }, (_, i) => i),
        (i) =>
          Effect.gen(function*() {
            const at = from + i * gapMs
            // Short naps: a jump between two posts would otherwise be slept through.
            while (clock.now() < at) yield* Effect.sleep(Duration.millis(Math.min(100, at - clock.now())))
            yield* call("POST", `${server.adminUrl}/v1/calls/${prefix}-${i}/outcome`, adminToken, body)
            posting.done++
          }),
        { concurrency, discard: true }
      )

      const virtualLimit = receiver.outage.until + 3 * 3_600_000
      const realLimit = realStart + (clock.jumps ? outageS * 1000 + 45 * 60_000 : virtualLimit - from)
      const drive = Effect.gen(function*() {
        // The listing reads every pending delivery: at most once a second, to load the server little.
        let listedAt = Number.NEGATIVE_INFINITY
        while (receiver.seen.arrivedAt.size < events) {
          if (clock.now() > virtualLimit || performance.now() > realLimit) return
          yield* Effect.sleep("200 millis")
          if (!clock.jumps || performance.now() - receiver.seen.lastRequestReal < 1_000) continue
          const now = clock.now()
          const fixed = [
            ...(posting.done < events ? [from + posting.done * gapMs] : []),
            ...(now < receiver.outage.until ? [receiver.outage.until] : [])
          ]
          if (fixed.some((at) => at - now < QUIET_MS) || performance.now() - listedAt < 1_000) continue
          listedAt = performance.now()
          const due = yield* earliestDue(call, server, adminToken, account.id)
          // None pending while some have not arrived: an outcome is still being taken in.
          if (due === undefined) continue
          const target = Math.min(...fixed, due) - LEAD_MS
          if (target - clock.now() < QUIET_MS) continue
          clock.jumpTo(target)
          yield* Effect.sleep(Duration.millis(JumpableClock.TAKES_EFFECT_MS))
          // Wakes the server's event loop, which may be waiting out a long timer that the jump made due.
          yield* call("GET", `${server.adminUrl}/v1/accounts/${account.id}/deliveries?limit=1`, adminToken)
        }
      })
      // A post that fails ends the trial; the drive ends once all arrived or a limit passed.
      yield* server.whileRunning(Effect.zip(post, drive, { concurrent: true }))

      const { seen } = receiver
      const afterReturn = [...seen.arrivedAt.values()].map((at) => (at - receiver.outage.until) / 1000).sort((a, b) => a - b)
      return {
        lastS: afterReturn.length === events ? afterReturn[afterReturn.length - 1]! : Number.NaN,
        halfS: afterReturn.length * 2 >= events ? afterReturn[Math.ceil(events / 2) - 1]! : Number.NaN,
        arrived: afterReturn.length,
        whileDown: seen.whileDown,
        total: seen.total,
        duplicates: seen.duplicates,
        jumpedS: clock.jumpedMillis() / 1000,
        realS: (performance.now() - realStart) / 1000
      } satisfies Result
    }))

  const results = new Map<string, Array<Result>>()
  const key = (build: Build["name"], outageS: number) => `${build} ${outageS}`
  for (let round = 1; round <= rounds; round++) {
    for (const [index, outageS] of outages.entries()) {
      // Which build goes first alternates, so neither always runs on the machine the other just warmed.
      const order = (round + index) % 2 === 1 ? builds : [...builds].reverse()
      for (const build of order) {
        const r = yield* trial(build, outageS, `${build.name}-${outageS}-${round}`)
        results.set(key(build.name, outageS), [...(results.get(key(build.name, outageS)) ?? []), r])
        yield* Console.log(
          `  round ${round}, outage ${outageS} s, ${build.name.padEnd(8)}: ${
            r.arrived === events ? `all ${events} arrived ${seconds(r.lastS)} s after the return` : `${r.arrived} of ${events} arrived`
          } (half by ${seconds(r.halfS)} s); ${r.whileDown} requests answered 503 while down; ${r.total} requests in all; ${r.duplicates} duplicates; clock jumped ${
            seconds(r.jumpedS)
          } s; ${seconds(r.realS)} s real; load average ${LoopbackRun.loadAverage()}`
        )
      }
    }
  }

  yield* Console.log(`\nmedians over ${rounds} round${rounds === 1 ? "" : "s"} (seconds on the server's clock; ratio = product / baseline)`)
  for (const outageS of outages) {
    const of = (build: Build["name"], pick: (r: Result) => number) => median((results.get(key(build, outageS)) ?? []).map(pick))
    const rows: ReadonlyArray<[string, (r: Result) => number, (n: number) => string]> = [
      ["return → last arrival (s)", (r) => r.lastS, seconds],
      ["return → half arrived (s)", (r) => r.halfS, seconds],
      ["requests answered while down", (r) => r.whileDown, (n) => n.toFixed(0)],
      ["requests in all", (r) => r.total, (n) => n.toFixed(0)],
      ["duplicates", (r) => r.duplicates, (n) => n.toFixed(0)]
    ]
    yield* Console.log(`  outage ${outageS} s, ${events} events      ${builds.map((b) => b.name.padStart(9)).join(" ")}${builds.length > 1 ? "     ratio" : ""}`)
    for (const [label, pick, format] of rows) {
      const values = builds.map((b) => of(b.name, pick))
      const ratio = values.length > 1 && values[1]! > 0 ? (values[0]! / values[1]!).toFixed(3) : "—"
      yield* Console.log(`    ${label.padEnd(30)} ${values.map((v) => format(v).padStart(9)).join(" ")}${builds.length > 1 ? ratio.padStart(10) : ""}`)
    }
  }
})

void runMain(main)
