/**
 * Fan-out at any size (issue 35): how long accepting a call outcome takes,
 * and how long its deliveries take to arrive, when the account has N lead
 * subscriptions. The real `crm-relay serve` binary (ROLE all), one account
 * whose N hooks are spread round robin over `--origins` loopback HTTPS
 * receivers (separate origins, so each gets its fair share of the delivery
 * slots), on PostgreSQL and on the embedded database.
 *
 *   npm run bench:fanout -- [--sizes 1,100,1000,10000] [--embedded-sizes 1,100,1000] [--outcomes 5] [--warmup 3] [--origins 4]
 *     [--databases postgres,embedded] [--database-url URL] [--pool 10] [--bin PATH] [--baseline PATH]
 *     [--server-log FILE]
 *
 * For each database, each build (`--bin`, this checkout's by default, and
 * `--baseline`, another checkout's `apps/server/bin/crm-relay.js`, if given)
 * runs its own server on its own fresh database (PostgreSQL: a fresh schema of
 * `--database-url`, else DATABASE_URL, dropped at the end; embedded: a fresh
 * DATA_DIR), with MAX_SUBSCRIPTIONS_PER_ACCOUNT raised to the largest size.
 * The embedded database measures `--embedded-sizes` (by default the sizes up
 * to 1 000: as one session it subscribes and delivers 10 000 at a pace that
 * takes a default run far past ten minutes; `--embedded-sizes 1,100,1000,10000`
 * asks for it).
 * For each size, ascending, both accounts are grown to N hooks through the
 * Event API (`POST /subscribe`), then `--outcomes` outcomes are posted one at
 * a time, the builds taking turns (which goes first flips every outcome): each
 * outcome's intake latency (send → 202 of `POST /v1/calls/{id}/outcome`), then
 * the time from its send until all N deliveries (distinct webhook-ids) arrived,
 * then a wait until the account has no pending delivery before the next one.
 * Prints, per database, intake p50/p99 and their ratio to N = 1, the median
 * time to deliver all and the deliveries/s it makes, and the issue's goals:
 * intake p50 at N = 1 000 ≤ 1.2 × N = 1, and 10 000 deliveries out at
 * ≥ 2 000/s. With five outcomes, p99 is the slowest of them.
 */
import { Console, Effect, Redacted } from "effect"
import { randomBytes } from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Argv from "../support/Argv.js"
import { freshSchema } from "../support/BenchDatabase.js"
import { jsonClient } from "../support/Http.js"
import * as LoopbackRun from "../support/LoopbackRun.js"
import { awaitNoPending, postOutcomes } from "../support/Outcomes.js"
import { type Arrivals, percentile, startReceiver } from "../support/Receiver.js"
import { runMain } from "../support/runMain.js"
import { BIN, builtBinary, type RunningServer, serve } from "../support/ServerProcess.js"

/** The database a run uses when neither --database-url nor DATABASE_URL names one. */
const DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/test"

/** `--name 1,100,...`: ascending distinct whole numbers of at least 1; exits with a sentence otherwise. */
const sizesOf = (name: string, fallback: string) => {
  const text = Argv.text(name) ?? fallback
  const list = [...new Set(text.split(",").map(Number))].sort((a, b) => a - b)
  if (list.some((n) => !Number.isInteger(n) || n < 1)) {
    process.stderr.write(`--${name} is a comma-separated list of whole numbers of at least 1, not ${JSON.stringify(text)}.\n`)
    process.exit(2)
  }
  return list
}

const sizes = sizesOf("sizes", "1,100,1000,10000")
/**
 * The embedded database is one session: there 10 000 hooks take minutes to subscribe and each 10 000
 * deliveries minutes to send, which would take a default run far past ten minutes. Ask for them here.
 */
const embeddedSizes = sizesOf("embedded-sizes", sizes.filter((n) => n <= 1000).join(",") || String(sizes[0]))
const outcomes = Argv.integer("outcomes", 5)
const warmup = Argv.integer("warmup", 3, 0)
const origins = Argv.integer("origins", 4)
const pool = Argv.integer("pool", 10)
const databases = (Argv.text("databases") ?? "postgres,embedded").split(",")
const databaseUrl = Argv.text("database-url") ?? process.env["DATABASE_URL"] ?? DEFAULT_DATABASE_URL
const serverLog = Argv.text("server-log")
if (databases.some((d) => d !== "postgres" && d !== "embedded")) {
  process.stderr.write(`--databases is postgres, embedded or both (comma-separated), not ${JSON.stringify(databases.join(","))}.\n`)
  process.exit(2)
}

/** A build under test: this checkout's (`product`) or another's (`baseline`). */
interface Build {
  readonly name: "product" | "baseline"
  readonly bin: string
}

/** A build's server on one database, and its account with `hooks` lead subscriptions. */
interface Subject {
  readonly build: Build
  readonly server: RunningServer
  readonly accountId: string
  hooks: number
}

/** One outcome: its intake latency and the time from its send until its last delivery arrived (NaN: not all did). */
interface Sample {
  readonly intakeMs: number
  readonly deliverMs: number
}

/** One build's figures at one size. */
interface Row {
  readonly size: number
  readonly intakeP50: number
  readonly intakeP99: number
  readonly deliverMs: number
  readonly missing: number
}

const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted.length === 0 ? Number.NaN : percentile(sorted, 50)
}

const ms = (value: number) => (Number.isNaN(value) ? "—" : value < 100 ? value.toFixed(1) : value.toFixed(0))

const main = Effect.gen(function*() {
  const builds: Array<Build> = [{ name: "product", bin: yield* builtBinary(Argv.text("bin") ?? BIN) }]
  const baselineBin = Argv.text("baseline")
  if (baselineBin !== undefined) builds.push({ name: "baseline", bin: yield* builtBinary(baselineBin) })
  const { serverEnv, tls } = yield* LoopbackRun.loopbackEgress("bench-fanout")
  const receivers = yield* Effect.forEach(Array.from({ length: origins }, () => tls), startReceiver)
  const targets = receivers.map((r) => r.url)
  const arrivals: ReadonlyArray<Arrivals> = receivers.map((r) => r.arrivals)
  const call = yield* jsonClient(16)
  const adminToken = randomBytes(24).toString("hex")
  const masterKey = randomBytes(32).toString("base64")
  const largest = Math.max(...sizes, ...embeddedSizes)
  yield* Console.log(
    `fan-out: sizes ${sizes.join(", ")} (embedded: ${embeddedSizes.join(", ")}); ${outcomes} outcome${outcomes === 1 ? "" : "s"} per size (after ${warmup} warm-up); ${origins} receiver origins; builds: ${
      builds.map((b) => `${b.name} ${b.bin}`).join(", ")
    }; ${Os.cpus().length} CPUs`
  )

  /** Distinct deliveries of `callId` received so far, and when the last of them arrived. */
  const received = (callId: string) => {
    let count = 0
    let last = 0
    for (const a of arrivals) {
      count += a.distinctByCall.get(callId) ?? 0
      last = Math.max(last, a.lastByCall.get(callId) ?? 0)
    }
    return { count, last }
  }

  /** Posts one outcome for `subject` and waits for its `size` deliveries, then for the account to have none pending. */
  const measureOne = (subject: Subject, size: number, prefix: string) =>
    Effect.gen(function*() {
      const requestMillis: Array<number> = []
      const accepted = yield* postOutcomes(call, subject.server.adminUrl, adminToken, subject.accountId, prefix, 1, { concurrency: 1, requestMillis })
      const [callId, at] = [...accepted][0]!
      const intakeMs = requestMillis[0]!
      const sent = at - intakeMs
      const deadline = performance.now() + 60_000 + size * 20
      yield* subject.server.whileRunning(Effect.gen(function*() {
        while (received(callId).count < size && performance.now() < deadline) yield* Effect.sleep("5 millis")
      }))
      const { count, last } = received(callId)
      yield* subject.server.whileRunning(awaitNoPending(call, subject.server.adminUrl, adminToken, subject.accountId, "2 minutes"))
      return { sample: { intakeMs, deliverMs: count >= size ? last - sent : Number.NaN } satisfies Sample, missing: Math.max(0, size - count) }
    })

  /** One database's run: every build's server and account, the sizes in turn, then its table. */
  const runOn = (database: "postgres" | "embedded") =>
    Effect.scoped(Effect.gen(function*() {
      const label = database === "postgres" ? "PostgreSQL" : "embedded (PGlite)"
      const subjects: Array<Subject> = []
      let version = ""
      for (const build of builds) {
        const fresh = database === "postgres" ? yield* freshSchema(Redacted.make(databaseUrl)) : undefined
        version = fresh?.version ?? version
        const server = yield* serve({
          bin: build.bin,
          databaseUrl: fresh?.url,
          pool,
          adminToken,
          masterKey,
          cpuProfileDir: undefined,
          stdout: serverLog === undefined ? "ignore" : Fs.openSync(serverLog, "a"),
          logLevel: serverLog === undefined ? "Warning" : "Info",
          env: { ROLE: "all", ...serverEnv, MAX_SUBSCRIPTIONS_PER_ACCOUNT: String(Math.max(100, largest)) },
          stopWithin: "30 seconds"
        })
        const account = yield* LoopbackRun.liveAccount(call, server, adminToken, `fan-out ${build.name}`)
        subjects.push({ build, server, accountId: account.id, hooks: 0 })
      }
      yield* Console.log(`\n${label}${version === "" ? "" : ` ${version}`}: a fresh ${database === "postgres" ? "schema" : "DATA_DIR"} per build; load average ${LoopbackRun.loadAverage()}`)
      const rows = new Map<Build["name"], Array<Row>>(builds.map((b) => [b.name, []]))
      const measured = database === "postgres" ? sizes : embeddedSizes
      for (const size of measured) {
        const started = performance.now()
        // Subscribing is one at a time per account (its row is locked to count them): the builds grow side by side.
        yield* Effect.forEach(subjects, (subject) =>
          Effect.map(LoopbackRun.subscribeMany(call, subject.server, adminToken, subject.accountId, size - subject.hooks, targets), () => {
            subject.hooks = size
          }), { concurrency: "unbounded", discard: true })
        yield* Console.log(`  N=${size}: ${subjects.length * size} hooks in ${((performance.now() - started) / 1000).toFixed(1)} s; load average ${LoopbackRun.loadAverage()}`)
        if (size === measured[0]) {
          for (let i = 0; i < warmup; i++) {
            for (const subject of subjects) yield* measureOne(subject, size, `${database}-${subject.build.name}-warmup-${i}`)
          }
        }
        const samples = new Map<Build["name"], Array<Sample>>(builds.map((b) => [b.name, []]))
        const missing = new Map<Build["name"], number>(builds.map((b) => [b.name, 0]))
        for (let i = 0; i < outcomes; i++) {
          // The builds take turns going first, so neither always meets the other's leftovers.
          const order = i % 2 === 0 ? subjects : [...subjects].reverse()
          for (const subject of order) {
            const one = yield* measureOne(subject, size, `${database}-${subject.build.name}-n${size}-${i}`)
            samples.get(subject.build.name)!.push(one.sample)
            missing.set(subject.build.name, missing.get(subject.build.name)! + one.missing)
          }
        }
        for (const build of builds) {
          const list = samples.get(build.name)!
          const intakes = list.map((s) => s.intakeMs).sort((a, b) => a - b)
          const delivered = list.map((s) => s.deliverMs).filter((v) => !Number.isNaN(v))
          const row: Row = {
            size,
            intakeP50: percentile(intakes, 50),
            intakeP99: percentile(intakes, 99),
            deliverMs: delivered.length === list.length ? median(delivered) : Number.NaN,
            missing: missing.get(build.name)!
          }
          rows.get(build.name)!.push(row)
          yield* Console.log(
            `    ${build.name.padEnd(8)} intake p50 ${ms(row.intakeP50)} ms, p99 ${ms(row.intakeP99)} ms; all ${size} out in ${ms(row.deliverMs)} ms${
              row.missing > 0 ? ` (${row.missing} deliveries never arrived)` : ""
            }`
          )
        }
      }
      yield* printTable(label, rows)
    }))

  for (const database of databases) yield* runOn(database as "postgres" | "embedded")
  const duplicates = arrivals.reduce((n, a) => n + a.duplicates, 0)
  yield* Console.log(`\nduplicates (a webhook-id received twice): ${duplicates}`)
})

/** The table of one database, and the issue's goals for each build. */
const printTable = (label: string, rows: ReadonlyMap<Build["name"], ReadonlyArray<Row>>) =>
  Effect.gen(function*() {
    yield* Console.log(`\n${label}: intake = send → 202 of POST /v1/calls/{id}/outcome; all out = send → last of the N deliveries arrived (median)`)
    yield* Console.log(`  build          N  intake p50    p99    ×N=1     all out  deliveries/s`)
    for (const [name, list] of rows) {
      const single = list.find((r) => r.size === 1)?.intakeP50 ?? Number.NaN
      for (const r of list) {
        yield* Console.log(
          `  ${name.padEnd(9)} ${String(r.size).padStart(6)}  ${ms(r.intakeP50).padStart(7)} ms ${ms(r.intakeP99).padStart(6)}  ${
            (Number.isNaN(single) ? "—" : (r.intakeP50 / single).toFixed(2)).padStart(6)
          }  ${ms(r.deliverMs).padStart(7)} ms  ${(r.size / (r.deliverMs / 1000)).toFixed(0).padStart(12)}${r.missing > 0 ? `  (${r.missing} never arrived)` : ""}`
        )
      }
    }
    for (const [name, list] of rows) {
      const at = (n: number) => list.find((r) => r.size === n)
      const [one, thousand, tenThousand] = [at(1), at(1000), at(10_000)]
      const ratio = one !== undefined && thousand !== undefined ? thousand.intakeP50 / one.intakeP50 : Number.NaN
      const rate = tenThousand === undefined ? Number.NaN : 10_000 / (tenThousand.deliverMs / 1000)
      yield* Console.log(
        `  ${name}: goal intake p50 at N=1000 ≤ 1.2 × N=1: ${
          Number.isNaN(ratio) ? "not measured (the sizes need 1 and 1000)" : `${ratio.toFixed(2)}×, ${ratio <= 1.2 ? "met" : "NOT met"}`
        }; goal 10 000 deliveries out at ≥ 2 000/s: ${
          tenThousand === undefined ? "not measured (the sizes need 10000)" : Number.isNaN(rate) ? "NOT met (not all arrived)" : `${rate.toFixed(0)}/s, ${rate >= 2000 ? "met" : "NOT met"}`
        }`
      )
    }
  })

void runMain(main)
