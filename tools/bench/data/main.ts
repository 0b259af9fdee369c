/**
 * Backup and move figures, with the built binary:
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npm run bench:data -- \
 *     [--deliveries 100000] [--pending 10000] [--accounts 50] [--rate 50] [--seconds 10]
 *     [--cpu-prof DIR] [--node-options FLAGS] [--serving-only]
 *
 * 1. An embedded DATA_DIR is filled (no server): `--accounts` accounts with a
 *    key and a subscription each, one sealed secret, and `--deliveries`
 *    deliveries of a realistic payload, `--pending` of them pending.
 * 2. `crm-relay db backup` with no server running: time and file size.
 * 3. `crm-relay db move --to` a fresh database on DATABASE_URL's server
 *    (dropped at the end): time.
 * 4. Intake while serving: `crm-relay serve` (ROLE=api) on the DATA_DIR takes
 *    outcomes at `--rate` a second for `--seconds` (after 5 s of warm-up), then again while
 *    `crm-relay db backup` runs through it; the 202's latency p50/p99/max of
 *    each phase, and the backup's time through the server.
 */
import { Migrations, Vault } from "@crm-relay/store"
import * as Database from "@crm-relay/store/Database"
import * as SqlClient from "@effect/sql/SqlClient"
import { Config, Console, Duration, Effect, Either, Fiber, Logger, LogLevel, Option, Redacted, Schedule } from "effect"
import * as ChildProcess from "node:child_process"
import { randomBytes, randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as Argv from "../support/Argv.js"
import { runMain } from "../support/runMain.js"
import { leadPayload } from "../support/SamplePayload.js"

const BIN = fileURLToPath(new URL("../../../apps/server/bin/crm-relay.js", import.meta.url))
const deliveries = Argv.integer("deliveries", 100_000)
const pending = Argv.integer("pending", 10_000, 0)
const accounts = Argv.integer("accounts", 50)
const rate = Argv.integer("rate", 50)
const seconds = Argv.integer("seconds", 10)
const cpuProfileDir = Argv.text("cpu-prof")
const nodeOptions = Argv.text("node-options")
const servingOnly = Argv.flag("serving-only")
const ADMIN_TOKEN = randomBytes(16).toString("hex")
const MASTER_KEY = Vault.generateMasterKey()

const quantile = (sorted: ReadonlyArray<number>, q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN
const summary = (latencies: ReadonlyArray<number>) => {
  const sorted = [...latencies].sort((a, b) => a - b)
  return `${sorted.length} outcomes, p50 ${quantile(sorted, 0.5).toFixed(1)} ms, p99 ${quantile(sorted, 0.99).toFixed(1)} ms, max ${(sorted.at(-1) ?? Number.NaN).toFixed(1)} ms`
}

/** Runs `crm-relay ...args` with `env` and answers its wall time in ms (fails on a non-zero exit). */
const timed = (args: ReadonlyArray<string>, env: Record<string, string>) =>
  Effect.async<number, string>((resume) => {
    const start = performance.now()
    ChildProcess.execFile(process.execPath, [BIN, ...args], { env: { PATH: process.env["PATH"] ?? "", ...env }, maxBuffer: 1 << 24 }, (error, _out, stderr) =>
      resume(error === null ? Effect.succeed(performance.now() - start) : Effect.fail(`crm-relay ${args.join(" ")} failed: ${stderr}`)))
  })

const seed = (dataDir: string) =>
  Effect.gen(function*() {
    yield* Migrations.run()
    const sql = yield* SqlClient.SqlClient
    const keys: Vault.MasterKeys = { current: Either.getOrThrow(Vault.parseMasterKey(MASTER_KEY)), previous: [] }
    const vault = yield* Vault.make(keys)
    yield* sql.withTransaction(vault.store(Redacted.make("bench-bridge-key"), "bench-owner"))
    const subscriptions: Array<{ id: string; account_id: string }> = []
    for (let i = 0; i < accounts; i++) {
      const [account] = yield* sql<{ id: string }>`INSERT INTO accounts (name, mode) VALUES (${`bench ${i}`}, 'live') RETURNING id`
      const [key] = yield* sql<{ id: string }>`
        INSERT INTO integration_keys (account_id, secret_hash) VALUES (${account!.id}, ${randomBytes(32)}) RETURNING id`
      const [subscription] = yield* sql<{ id: string; account_id: string }>`
        INSERT INTO subscriptions (account_id, created_by_key_id, target_url, event)
        VALUES (${account!.id}, ${key!.id}, ${`https://receiver.example/hook/${i}`}, 'lead') RETURNING id, account_id`
      subscriptions.push(subscription!)
    }
    const payload = leadPayload
    yield* sql`
      INSERT INTO deliveries (account_id, subscription_id, event, call_id, target_url, payload, status, attempts, delivered_at)
      SELECT s.account_id, s.id, 'lead', 'call-' || g, 'https://receiver.example/hook', ${payload}::jsonb,
        CASE WHEN g <= ${pending} THEN 'pending' ELSE 'delivered' END, 1,
        CASE WHEN g <= ${pending} THEN NULL ELSE now() END
      FROM generate_series(1, ${deliveries}) AS g
      JOIN jsonb_to_recordset(${JSON.stringify(subscriptions.map((s, i) => ({ ...s, n: i })))}::jsonb)
        AS s(id uuid, account_id uuid, n int) ON s.n = g % ${accounts}`
  }).pipe(Effect.provide(Database.layerPglite({ dataDir })), Logger.withMinimumLogLevel(LogLevel.Warning))

/** NODE_OPTIONS of the serving process, when it has any. */
const serveNodeOptions = (): Record<string, string> => {
  const flags = [
    ...(nodeOptions === undefined ? [] : [nodeOptions]),
    ...(cpuProfileDir === undefined ? [] : [`--cpu-prof --cpu-prof-dir=${Path.resolve(cpuProfileDir)}`])
  ]
  return flags.length === 0 ? {} : { NODE_OPTIONS: flags.join(" ") }
}

/** `serve` on `dataDir` until the scope ends; answers its internal URL once published. */
const serving = (env: Record<string, string>, dataDir: string) =>
  Effect.gen(function*() {
    const child = yield* Effect.acquireRelease(
      Effect.sync(() =>
        ChildProcess.spawn(process.execPath, [BIN, "serve"], {
          env: { PATH: process.env["PATH"] ?? "", ...env, ...serveNodeOptions() },
          stdio: "ignore"
        })
      ),
      (c) => Effect.async<void>((resume) => {
        c.once("exit", () => resume(Effect.void))
        c.kill("SIGTERM")
      })
    )
    const file = Path.join(dataDir, "server.json")
    return yield* Effect.suspend(() => {
      try {
        const info = JSON.parse(Fs.readFileSync(file, "utf8")) as { pid: number; adminUrl: string }
        return info.pid === child.pid ? Effect.succeed(info.adminUrl) : Effect.fail("starting")
      } catch {
        return Effect.fail("starting")
      }
    }).pipe(Effect.retry(Schedule.spaced(Duration.millis(100)).pipe(Schedule.upTo(Duration.minutes(5)))))
  })

/** Posts one outcome to `admin` and answers its latency in ms; any answer but 202 fails the run. */
const post = (admin: string, accountId: string) =>
  Effect.gen(function*() {
    const callId = `call-${randomUUID()}`
    const start = performance.now()
    const status = yield* Effect.promise(async () => {
      const response = await fetch(`${admin}/v1/calls/${callId}/outcome`, {
        method: "POST",
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify({
          account_id: accountId, tenant_id: "t-1", classification: "lead", source: "Bench (phone)", tags: [],
          caller: { full_name: "Ada Lovelace", first_name: "Ada", last_name: "Lovelace", phones: ["+1 555 0100"], emails: [], address: "" },
          lead: { job_type: "Boiler repair", summary: "No hot water", notes: "", urgency: "normal" }
        })
      })
      await response.arrayBuffer()
      return response.status
    })
    if (status !== 202) return yield* Effect.dieMessage(`outcome answered ${status}`)
    return performance.now() - start
  })

/** Outcomes at `rate` a second while `during` runs (or for `--seconds`); their latencies. */
const intake = <A, E>(admin: string, accountId: string, during: Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const latencies: Array<number> = []
    const poster = yield* post(admin, accountId).pipe(
      Effect.tap((ms) => Effect.sync(() => latencies.push(ms))),
      Effect.fork,
      Effect.schedule(Schedule.fixed(Duration.millis(1000 / rate))),
      Effect.fork
    )
    const result = yield* during
    yield* Fiber.interrupt(poster)
    return { latencies, result }
  })

const main = Effect.gen(function*() {
  const configured = yield* Config.option(Config.string("DATABASE_URL"))
  if (Option.isNone(configured)) return yield* Effect.fail("Set DATABASE_URL to a PostgreSQL server: db move needs a target.")
  const databaseUrl = configured.value
  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "crm-relay-bench-data-"))),
    (d) => Effect.sync(() => Fs.rmSync(d, { recursive: true, force: true }))
  )
  const dataDir = Path.join(dir, "data")
  const env = { DATA_DIR: dataDir, ADMIN_TOKEN, MASTER_KEY: Redacted.value(MASTER_KEY), LOG_LEVEL: "Warning", PORT: "0", ADMIN_PORT: "0", PORTAL_PORT: "0" }
  yield* Console.log(`Seeding ${deliveries} deliveries (${pending} pending), ${accounts} accounts into an embedded database...`)
  yield* seed(dataDir)

  if (!servingOnly) yield* Effect.gen(function*() {
    const file = Path.join(dir, "bench.crm-relay-backup")
    const backupMs = yield* timed(["db", "backup", file], env)
    yield* Console.log(`db backup (server stopped): ${(backupMs / 1000).toFixed(1)} s, ${(Fs.statSync(file).size / 1_048_576).toFixed(1)} MiB`)

    const server = new URL(databaseUrl)
    const name = `crm_relay_bench_${randomBytes(4).toString("hex")}`
    const admin = Database.layerPostgres({ url: Redacted.make(databaseUrl), poolSize: 1 })
    yield* Effect.acquireRelease(
      Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(`CREATE DATABASE ${name}`)).pipe(Effect.provide(admin)),
      () => Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).pipe(Effect.provide(admin), Effect.ignore)
    )
    server.pathname = `/${name}`
    server.search = ""
    const moveMs = yield* timed(["db", "move", "--to", server.toString()], env)
    yield* Console.log(`db move --to PostgreSQL: ${(moveMs / 1000).toFixed(1)} s`)
  })

  yield* Effect.scoped(Effect.gen(function*() {
    const adminUrl = yield* serving({ ...env, ROLE: "api" }, dataDir)
    const accountId = yield* Effect.flatMap(
      Effect.promise(() => fetch(`${adminUrl}/v1/accounts`, { method: "POST", headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" }, body: JSON.stringify({ name: "intake" }) }).then((r) => r.json() as Promise<{ id: string }>)),
      (a) => Effect.succeed(a.id)
    )
    // Warm-up (not counted): the first requests of a new process compile its code.
    yield* intake(adminUrl, accountId, Effect.sleep(Duration.seconds(5)))
    const without = yield* intake(adminUrl, accountId, Effect.sleep(Duration.seconds(seconds)))
    yield* Console.log(`Intake without a backup (${rate}/s): ${summary(without.latencies)}`)
    const during = yield* intake(adminUrl, accountId, timed(["db", "backup", Path.join(dir, "live.crm-relay-backup")], env))
    yield* Console.log(`Intake during db backup through the server (${rate}/s): ${summary(during.latencies)}`)
    yield* Console.log(`db backup through the running server: ${(during.result / 1000).toFixed(1)} s`)
  }))
  yield* Console.log(`Load average: ${Os.loadavg().map((n) => n.toFixed(2)).join(" ")}`)
})

runMain(main)
