/**
 * The database cost of a call outcome (issue 35), from PostgreSQL's own
 * counters: commits (pg_stat_database.xact_commit of the bench's database)
 * and WAL bytes (pg_current_wal_lsn) per outcome, the deliveries' completion
 * included. PostgreSQL only.
 *
 *   npm run bench:db-cost -- [--outcomes 200] [--subscriptions 1] [--rounds 2] [--concurrency 8]
 *     [--database-url URL] [--pool 10] [--bin PATH] [--baseline PATH] [--server-log FILE] [--detail]
 *
 * Each round, for each build (`--bin`, this checkout's by default, and
 * `--baseline`, another checkout's `apps/server/bin/crm-relay.js`, if given;
 * which goes first flips every round), alone on the database: a server
 * (ROLE all) on a fresh schema of `--database-url` (else DATABASE_URL),
 * one account with `--subscriptions` lead hooks to a loopback HTTPS receiver,
 * five warm-up outcomes delivered; then, with PostgreSQL's counts settled
 * before every reading (PgCounters.ts: PostgreSQL 15 reports a backend's
 * counts up to 10 s late): an idle window of the server alone (its background
 * work: polls, sweeps), then `--outcomes` outcomes posted (`--concurrency` at
 * a time) and awaited until every delivery arrived and is recorded delivered.
 * Per outcome: commits, and WAL bytes — the cluster's LSN difference, and the
 * part of it in this database's own records (pg_walinspect, created for the
 * run when missing); commits and this database's WAL less the idle window's
 * rate over the run's window.
 * Full-page images: the first change of a page after a checkpoint logs the
 * whole page, so a window that happens to follow a timed checkpoint pays more.
 * Each window therefore starts with a CHECKPOINT (when allowed), both builds
 * alike, and this database's WAL is shown with and without its images.
 * `--detail` also prints, for each build's last round, where that WAL went:
 * bytes per outcome by record kind and relation (pg_walinspect), images apart.
 * Goals: ≤ 2 commits and ≤ 2 KiB WAL per outcome (this database's records).
 * Run nothing else on the bench's database meanwhile: every backend of it counts.
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import { Console, Data, Effect, Redacted } from "effect"
import { randomBytes } from "node:crypto"
import * as Fs from "node:fs"
import * as Argv from "../support/Argv.js"
import { freshSchema } from "../support/BenchDatabase.js"
import { jsonClient } from "../support/Http.js"
import * as LoopbackRun from "../support/LoopbackRun.js"
import { awaitNoPending, postOutcomes } from "../support/Outcomes.js"
import * as PgCounters from "../support/PgCounters.js"
import { startReceiver } from "../support/Receiver.js"
import { runMain } from "../support/runMain.js"
import { BIN, builtBinary, serve } from "../support/ServerProcess.js"

/** The database a run uses when neither --database-url nor DATABASE_URL names one. */
const DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/test"
const WARMUP = 5

const outcomes = Argv.integer("outcomes", 200)
const subscriptions = Argv.integer("subscriptions", 1)
const rounds = Argv.integer("rounds", 2)
const concurrency = Argv.integer("concurrency", 8)
const pool = Argv.integer("pool", 10)
const databaseUrl = Redacted.make(Argv.text("database-url") ?? process.env["DATABASE_URL"] ?? DEFAULT_DATABASE_URL)
const serverLog = Argv.text("server-log")
/** Also print each build's WAL by record kind and relation, per outcome, in its last round. */
const detail = Argv.flag("detail")

/** A round's deliveries were not all made in time: its counters would not hold the whole cost. */
class NotDelivered extends Data.TaggedError("NotDelivered")<{ readonly message: string }> {}

/** A build under test: this checkout's (`product`) or another's (`baseline`). */
interface Build {
  readonly name: "product" | "baseline"
  readonly bin: string
}

/** One build's figures of one round, per outcome, the idle background already taken out. */
interface Cost {
  readonly commits: number
  readonly rollbacks: number
  /** The cluster's LSN difference over the run's window, as it is (other databases' WAL included). */
  readonly clusterWal: number
  /** This database's records' share of it (pg_walinspect); NaN without it. */
  readonly ownWal: number
  /** Full-page images' share of `ownWal` (0..1). */
  readonly fullPages: number
  /** `ownWal` without its full-page images: what the rows and index entries themselves cost. */
  readonly ownWalWithoutImages: number
  /** The idle window: commits and WAL bytes (this database's) per second. */
  readonly idleCommitsPerSecond: number
  readonly idleWalPerSecond: number
  readonly seconds: number
}

const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = sorted.length / 2
  return sorted.length === 0
    ? Number.NaN
    : sorted.length % 2 === 1
    ? sorted[Math.floor(middle)]!
    : (sorted[middle - 1]! + sorted[middle]!) / 2
}

const kib = (bytes: number) => (Number.isNaN(bytes) ? "—" : `${(bytes / 1024).toFixed(2)} KiB`)

const describe = (c: Cost) =>
  `${c.commits.toFixed(2)} commits (${c.rollbacks.toFixed(2)} rollbacks), WAL ${kib(c.ownWal)} of this database (${
    Number.isNaN(c.fullPages) ? "—" : (c.fullPages * 100).toFixed(0)
  } % full-page images; ${kib(c.ownWalWithoutImages)} without them), ${kib(c.clusterWal)} cluster-wide per outcome; idle server: ${c.idleCommitsPerSecond.toFixed(2)} commits/s, ${
    c.idleWalPerSecond.toFixed(0)
  } B/s WAL; run window ${c.seconds.toFixed(1)} s`

const main = Effect.gen(function*() {
  const builds: Array<Build> = [{ name: "product", bin: yield* builtBinary(Argv.text("bin") ?? BIN) }]
  const baselineBin = Argv.text("baseline")
  if (baselineBin !== undefined) builds.push({ name: "baseline", bin: yield* builtBinary(baselineBin) })
  // The counters' own client: one connection, kept open between readings.
  const admin = yield* PgClient.make({ url: databaseUrl, maxConnections: 1, idleTimeout: "1 hour" })
  const [database] = yield* admin<{ name: string; version: string }>`SELECT current_database() AS name, current_setting('server_version') AS version`
  const inspect = yield* PgCounters.walInspect(admin)
  const checkpoints = yield* PgCounters.checkpoint(admin)
  const { serverEnv, tls } = yield* LoopbackRun.loopbackEgress("bench-db-cost")
  const receiver = yield* startReceiver(tls)
  const call = yield* jsonClient(Math.max(concurrency, 8))
  const adminToken = randomBytes(24).toString("hex")
  const masterKey = randomBytes(32).toString("base64")
  yield* Console.log(
    `db-cost: PostgreSQL ${database?.version}, database ${database?.name}; ${outcomes} outcomes (${concurrency} at a time), ${subscriptions} subscription${
      subscriptions === 1 ? "" : "s"
    }; ${rounds} round${rounds === 1 ? "" : "s"}; builds: ${builds.map((b) => `${b.name} ${b.bin}`).join(", ")}`
  )
  yield* Console.log(
    inspect
      ? "WAL of this database: its records in the window (pg_walinspect), with their share of page headers; the cluster-wide LSN difference also counts other databases writing meanwhile."
      : "pg_walinspect is not available (not installed, or not a superuser): WAL is the cluster-wide LSN difference only, which also counts other databases writing meanwhile."
  )
  yield* Console.log(
    checkpoints
      ? "Each window starts with a CHECKPOINT, so both builds pay the full-page images of a clean start alike; WAL is shown with and without them."
      : "CHECKPOINT is not allowed (neither superuser nor pg_checkpoint): a window may or may not follow a timed checkpoint, so compare the WAL without full-page images."
  )

  /** One build's round, alone on the database (see the module comment). */
  const measure = (build: Build, round: number) =>
    Effect.scoped(Effect.gen(function*() {
      const fresh = yield* freshSchema(databaseUrl)
      const server = yield* serve({
        bin: build.bin,
        databaseUrl: fresh.url,
        pool,
        adminToken,
        masterKey,
        cpuProfileDir: undefined,
        stdout: serverLog === undefined ? "ignore" : Fs.openSync(serverLog, "a"),
        logLevel: serverLog === undefined ? "Warning" : "Info",
        env: { ROLE: "all", ...serverEnv, MAX_SUBSCRIPTIONS_PER_ACCOUNT: String(Math.max(100, subscriptions)) },
        stopWithin: "30 seconds"
      })
      const account = yield* LoopbackRun.liveAccount(call, server, adminToken, `db-cost ${build.name}`)
      yield* LoopbackRun.subscribeMany(call, server, adminToken, account.id, subscriptions, [receiver.url])
      /** Posts `count` outcomes and waits until all their deliveries arrived and are recorded delivered. */
      const offer = (prefix: string, count: number) =>
        server.whileRunning(Effect.gen(function*() {
          const accepted = yield* postOutcomes(call, server.adminUrl, adminToken, account.id, prefix, count, { concurrency })
          const deadline = performance.now() + 300_000
          const arrived = () => [...accepted.keys()].every((id) => (receiver.arrivals.distinctByCall.get(id) ?? 0) >= subscriptions)
          while (!arrived() && performance.now() < deadline) yield* Effect.sleep("20 millis")
          const settled = yield* awaitNoPending(call, server.adminUrl, adminToken, account.id, "2 minutes")
          if (!arrived() || !settled) {
            return yield* new NotDelivered({
              message: `${build.name}: the deliveries of ${count} outcomes were not all made within 5 minutes, so the counters would miss part of their cost; run --server-log FILE to see why.`
            })
          }
        }))
      yield* offer(`${build.name}-r${round}-warmup`, WARMUP)

      yield* Effect.sleep(PgCounters.SETTLE)
      if (checkpoints) yield* PgCounters.checkpoint(admin)
      const r0 = yield* PgCounters.read(admin)
      yield* Effect.sleep(PgCounters.SETTLE)
      if (checkpoints) yield* PgCounters.checkpoint(admin)
      const r1 = yield* PgCounters.read(admin)
      yield* offer(`${build.name}-r${round}`, outcomes)
      yield* Effect.sleep(PgCounters.SETTLE)
      const r2 = yield* PgCounters.read(admin)
      // The idle window holds the second CHECKPOINT, itself a transaction of this database.
      const idle = { ...PgCounters.difference(r0, r1), commits: PgCounters.difference(r0, r1).commits - (checkpoints ? 1 : 0) }
      const run = PgCounters.difference(r1, r2)
      const idleRecords = inspect ? yield* PgCounters.walRecords(admin, r0.lsn, r1.lsn) : undefined
      const runRecords = inspect ? yield* PgCounters.walRecords(admin, r1.lsn, r2.lsn) : undefined
      // This database's share of the WAL, page headers and padding shared out in proportion to record bytes.
      const own = (w: PgCounters.Window, records: PgCounters.WalRecords | undefined, images = true) =>
        records === undefined
          ? Number.NaN
          : records.all === 0
          ? 0
          : (w.walBytes * (records.ours - (images ? 0 : records.oursFullPages))) / records.all
      const idleWalPerSecond = own(idle, idleRecords) / idle.seconds
      const idleWalWithoutImagesPerSecond = own(idle, idleRecords, false) / idle.seconds
      const idleCommitsPerSecond = idle.commits / idle.seconds
      if (detail && inspect && round === rounds) {
        yield* Console.log(`${build.name}, round ${round}: this database's WAL by record kind and relation, per outcome (idle background included)`)
        for (const part of yield* PgCounters.walBreakdown(admin, r1.lsn, r2.lsn)) {
          if (part.bytes / outcomes < 1) continue
          yield* Console.log(
            `  ${(part.bytes / outcomes).toFixed(0).padStart(6)} B (images ${(part.fullPages / outcomes).toFixed(0).padStart(4)} B, ${
              (part.records / outcomes).toFixed(2)
            } records)  ${part.kind.padEnd(28)} ${part.relation}`
          )
        }
      }
      return {
        commits: (run.commits - idleCommitsPerSecond * run.seconds) / outcomes,
        rollbacks: run.rollbacks / outcomes,
        // Other databases' WAL comes and goes: an idle window's rate of it says nothing of the run's.
        clusterWal: run.walBytes / outcomes,
        ownWal: (own(run, runRecords) - idleWalPerSecond * run.seconds) / outcomes,
        fullPages: runRecords === undefined || runRecords.ours === 0 ? Number.NaN : runRecords.oursFullPages / runRecords.ours,
        ownWalWithoutImages: (own(run, runRecords, false) - idleWalWithoutImagesPerSecond * run.seconds) / outcomes,
        idleCommitsPerSecond,
        idleWalPerSecond,
        seconds: run.seconds
      } satisfies Cost
    }))

  const costs = new Map<Build["name"], Array<Cost>>(builds.map((b) => [b.name, []]))
  for (let round = 1; round <= rounds; round++) {
    // The builds take turns going first; each runs alone, so its counts are its own.
    for (const build of round % 2 === 1 ? builds : [...builds].reverse()) {
      const cost = yield* measure(build, round)
      costs.get(build.name)!.push(cost)
      yield* Console.log(`round ${round} ${build.name}: ${describe(cost)}; load average ${LoopbackRun.loadAverage()}`)
    }
  }
  yield* Console.log(`medians over ${rounds} round${rounds === 1 ? "" : "s"} (the idle server's background taken out of this database's figures):`)
  for (const [name, list] of costs) {
    const commits = median(list.map((c) => c.commits))
    const own = median(list.map((c) => c.ownWal))
    const cluster = median(list.map((c) => c.clusterWal))
    const withoutImages = median(list.map((c) => c.ownWalWithoutImages))
    const wal = Number.isNaN(own) ? cluster : own
    yield* Console.log(
      `  ${name}: ${commits.toFixed(2)} commits per outcome (goal ≤ 2: ${commits <= 2 ? "met" : "NOT met"}); WAL ${kib(wal)} per outcome${
        Number.isNaN(own)
          ? " (cluster-wide: other databases' WAL included)"
          : ` (this database's records, ${kib(withoutImages)} without full-page images; cluster-wide ${kib(cluster)})`
      } (goal ≤ 2 KiB: ${wal <= 2048 ? "met" : "NOT met"})`
    )
  }
  if (builds.length === 2) {
    const [now, then] = builds.map((b) => costs.get(b.name)!)
    const ratio = (f: (c: Cost) => number) => (median(now!.map(f)) / median(then!.map(f))).toFixed(2)
    yield* Console.log(
      `  product / baseline: commits ${ratio((c) => c.commits)}×, WAL ${ratio((c) => (Number.isNaN(c.ownWal) ? c.clusterWal : c.ownWal))}×, WAL without full-page images ${
        ratio((c) => c.ownWalWithoutImages)
      }×`
    )
  }
})

void runMain(main)
