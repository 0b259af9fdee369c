/**
 * An upgrade under load, from an earlier release to this tree (issue 41):
 * the release executables of both, replicas of the old one serving a steady
 * load on one PostgreSQL, a replica of the new one started beside them (it
 * migrates), then the old ones stopped one at a time. A migration that breaks
 * a running old replica fails this script, not an operator.
 *
 *   npm run upgrade:check -- [--from <commit>] [--rate 50] [--push-every 10] [--phase-seconds 15] [--drain-seconds 180]
 *     [--keep-logs]
 *
 * `--from` defaults to the last commit of main's history before the newest
 * migration file arrived (the last release that lacks it). Its executable is
 * built in a temporary `git worktree` with its own `npm ci` and kept by
 * commit under the system's temporary folder (see Releases.ts); this tree's
 * is `npm run release`. PostgreSQL: DATABASE_URL, or
 * postgres://postgres@127.0.0.1:5432/postgres; the run creates a database
 * of its own (`crm_relay_upgrade_<random>`) and drops it at the end.
 *
 * The run, every replica ROLE=all with the same MASTER_KEY and its own
 * DATA_DIR and ports, outcomes at `--rate` a second round robin over the
 * replicas in the rotation (Load.ts), each phase `--phase-seconds` long:
 * 1. old A and old B (the first one migrates the fresh database to its level);
 *    two accounts, each with one lead subscription to a loopback HTTPS
 *    receiver; the second's tenant has a CRM connection to a loopback
 *    reference bridge, and every `--push-every`-th outcome is its (pushed,
 *    then delivered: the lead event follows the push). One tenant's bridge is
 *    served by at most CRM_PUSH_MAX_PER_BRIDGE pushes at a time per replica,
 *    a few a second on a loaded two-core machine: all 50 a second to one
 *    bridge would measure that cap, not the upgrade;
 * 2. new N starts (it migrates) and joins the rotation;
 * 3. A leaves the rotation and, once every request sent to it has its answer
 *    (a draining balancer), is stopped (SIGTERM; it must exit 0);
 * 4. the same for B; then N alone;
 * 5. the load stops; every outcome answered 202 must reach the receiver and
 *    the bridge within `--drain-seconds`.
 *
 * It fails (exit 1) when any of these is not zero: statuses outside the
 * contract (202 and the Error object's statuses: 400, 401, 404, 409, 413,
 * 429, 502), requests not answered at all, outcomes given up on, events of a 202
 * that never reached the receiver (lost), events delivered under more than
 * one webhook-id (doubled), pushes missing or done twice (leads.create
 * answered 2xx twice for one call), old replicas' log lines at level error or
 * fatal (or on stderr) from the new replica's start on, and old replicas that
 * did not exit 0 on SIGTERM. The summary is a Markdown table a note can quote.
 */
import { ReferenceBridge } from "@crm-relay/reference-bridge"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Console, Duration, Effect, Exit, Redacted, Scope } from "effect"
import { randomBytes } from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Argv from "../support/Argv.js"
import { jsonClient } from "../support/Http.js"
import * as LoopbackRun from "../support/LoopbackRun.js"
import { leadOutcome, startReceiver } from "../support/Receiver.js"
import { runMain } from "../support/runMain.js"
import { serve } from "../support/ServerProcess.js"
import * as Load from "./Load.js"
import * as Releases from "./Releases.js"
import * as ReplicaLog from "./ReplicaLog.js"

const rate = Argv.integer("rate", 50)
const phaseMs = Argv.integer("phase-seconds", 15) * 1000
const drainMs = Argv.integer("drain-seconds", 180) * 1000
const keepLogs = Argv.flag("keep-logs")
/** Every this many-th outcome is of the account whose tenant has a CRM connection (pushed, then delivered). */
const pushEvery = Argv.integer("push-every", 10)
const TENANT = "upgrade-tenant"
const BRIDGE_KEY = "upgrade-bridge-key"

/** A fresh database of the PostgreSQL `base` names, for the scope: its URL. */
const freshDatabase = (base: string) =>
  Effect.gen(function*() {
    const admin = yield* PgClient.make({ url: Redacted.make(base), maxConnections: 1 })
    const name = `crm_relay_upgrade_${randomBytes(5).toString("hex")}`
    yield* Effect.acquireRelease(
      admin`CREATE DATABASE ${admin(name)}`,
      () => admin`DROP DATABASE IF EXISTS ${admin(name)} WITH (FORCE)`.pipe(Effect.ignore)
    )
    const [version] = yield* admin<{ server_version: string }>`SHOW server_version`
    const url = new URL(base)
    url.pathname = `/${name}`
    return { name, url: Redacted.make(url.toString()), version: version?.server_version ?? "?" }
  })

const short = (commit: string) => commit.slice(0, 7)

const main = Effect.gen(function*() {
  const say = (line: string) => Console.log(line)
  const fromArg = Argv.text("from")
  const from = yield* (fromArg === undefined ? Releases.defaultFrom() : Releases.resolveCommit(fromArg))
  const tree = Releases.thisTree()
  const oldBin = yield* Releases.releaseOf(from, say)
  const newBin = yield* Releases.releaseOfThisTree(say)
  const fromName = `${short(from)} (${Releases.versionAt(from)})`
  const toName = `${short(tree.commit)}${tree.dirty ? "+changes" : ""} (${Releases.versionAt("HEAD")}${tree.dirty ? ", this tree" : ""})`

  const database = yield* freshDatabase(process.env["DATABASE_URL"] ?? "postgres://postgres@127.0.0.1:5432/postgres")
  const { serverEnv, tls } = yield* LoopbackRun.loopbackEgress("upgrade-check")
  const logDir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "crm-relay-upgrade-logs-"))
  if (!keepLogs) yield* Effect.addFinalizer(() => Effect.sync(() => Fs.rmSync(logDir, { recursive: true, force: true })))
  const receiver = yield* startReceiver(tls)
  const bridge = yield* ReferenceBridge.make({ tenants: [{ tenantId: TENANT, apiKey: BRIDGE_KEY }], tls })
  const adminToken = randomBytes(24).toString("hex")
  const masterKey = randomBytes(32).toString("base64")
  yield* say(
    `upgrade check: ${fromName} → ${toName}; PostgreSQL ${database.version}, database ${database.name}; ${rate} outcomes/s; phases of ${
      phaseMs / 1000
    } s; ${Os.cpus().length} CPUs; load average ${LoopbackRun.loadAverage()}`
  )

  /** A replica in a scope of its own (closing it sends SIGTERM and waits up to 60 s), its log in `logDir/name.log`. */
  const replica = (name: string, bin: string) =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const log = Path.join(logDir, `${name}.log`)
      const fd = Fs.openSync(log, "a")
      const started = performance.now()
      const server = yield* serve({
        bin,
        databaseUrl: database.url,
        pool: 5,
        adminToken,
        masterKey,
        cpuProfileDir: undefined,
        stdout: fd,
        stderr: fd,
        logLevel: "Warning",
        env: { ROLE: "all", ...serverEnv },
        stopWithin: "60 seconds"
      }).pipe(Scope.extend(scope))
      Fs.closeSync(fd)
      yield* say(`  ${name} (pid ${server.pid}) listening after ${((performance.now() - started) / 1000).toFixed(1)} s`)
      return { name, log, server, scope }
    })
  type Replica = Effect.Effect.Success<ReturnType<typeof replica>>
  const live: Array<Replica> = []
  yield* Effect.addFinalizer(() => Effect.forEach(live, (r) => Scope.close(r.scope, Exit.void), { discard: true }))

  const phase = { current: "setup" }
  const phases: Array<{ name: string; startedMs: number; endedMs: number }> = []
  const enter = (name: string) =>
    Effect.gen(function*() {
      const now = performance.now()
      const last = phases.at(-1)
      if (last !== undefined) last.endedMs = now
      phases.push({ name, startedMs: now, endedMs: Number.NaN })
      phase.current = name
      yield* say(`phase: ${name}`)
    })

  const oldA = yield* replica("old A", oldBin)
  live.push(oldA)
  const oldB = yield* replica("old B", oldBin)
  live.push(oldB)
  const call = yield* jsonClient(8)
  // Two accounts, each with one lead subscription to the receiver; the second's tenant has a CRM connection, so its
  // outcomes are pushed first (the lead event follows the push).
  const webhookOnly = yield* LoopbackRun.liveAccount(call, oldA.server, adminToken, "upgrade check: webhook")
  yield* LoopbackRun.subscribeLeads(call, oldA.server, webhookOnly.key, receiver.url)
  const pushed = yield* LoopbackRun.liveAccount(call, oldA.server, adminToken, "upgrade check: CRM push and webhook")
  yield* LoopbackRun.subscribeLeads(call, oldA.server, pushed.key, receiver.url)
  yield* call("PUT", `${oldA.server.adminUrl}/v1/accounts/${pushed.id}/connections/${TENANT}`, adminToken, {
    transport: "rest",
    url: bridge.restBaseUrl,
    auth: { type: "api_key", key: BRIDGE_KEY }
  })
  const pushes = (i: number) => i % pushEvery === 0
  const bodies = [leadOutcome(webhookOnly.id, "upgrade-no-crm"), leadOutcome(pushed.id, TENANT)] as const

  const rotation: Array<Load.Target> = [
    { name: oldA.name, adminUrl: oldA.server.adminUrl },
    { name: oldB.name, adminUrl: oldB.server.adminUrl }
  ]
  const leave = (name: string) => rotation.splice(rotation.findIndex((t) => t.name === name), 1)
  const load = yield* Load.start({ rotation, phase, perSecond: rate, adminToken, bodyOf: (i) => bodies[pushes(i) ? 1 : 0] })
  yield* enter("old A + old B")
  yield* Effect.sleep(Duration.millis(phaseMs))

  // From here on, an old replica's error counts: the new one may migrate at any moment of its start.
  const offsets = new Map([oldA, oldB].map((r) => [r.name, ReplicaLog.size(r.log)]))
  yield* enter("new N starting (migrates)")
  const newN = yield* replica("new N", newBin)
  live.push(newN)
  rotation.push({ name: newN.name, adminUrl: newN.server.adminUrl })
  yield* enter("old A + old B + new N")
  yield* Effect.sleep(Duration.millis(phaseMs))

  const exits = new Map<string, string>()
  for (const [old, next] of [[oldA, "old B + new N"], [oldB, "new N alone"]] as const) {
    leave(old.name)
    yield* enter(`${old.name} stopping (SIGTERM)`)
    // Requests already sent to it are answered before it is asked to stop, as behind a draining balancer.
    yield* load.drained(old.name, "30 seconds")
    const stopping = performance.now()
    yield* Scope.close(old.scope, Exit.void)
    live.splice(live.indexOf(old), 1)
    exits.set(old.name, old.server.ended() ?? "still running after 60 s")
    yield* say(`  ${old.name} stopped in ${((performance.now() - stopping) / 1000).toFixed(1)} s (${exits.get(old.name)})`)
    yield* enter(next)
    yield* Effect.sleep(Duration.millis(phaseMs))
  }
  yield* enter("drain")
  yield* load.stop
  const drainStart = performance.now()

  const { accepted } = load.tally
  const leadsByCall = Effect.map(bridge.control.received, (requests) => {
    const counts = new Map<string, number>()
    for (const r of requests) {
      if (r.operation !== "leads.create" || typeof r.status !== "number" || r.status < 200 || r.status > 299) continue
      const body = r.body as { call_id?: unknown; lead?: { call_id?: unknown } } | undefined
      const callId = String(body?.call_id ?? body?.lead?.call_id ?? "")
      counts.set(callId, (counts.get(callId) ?? 0) + 1)
    }
    return counts
  })
  const missing = Effect.map(leadsByCall, (leads) => {
    let events = 0
    let missingPushes = 0
    for (const id of accepted) {
      if (!receiver.arrivals.byCall.has(id)) events++
      if (pushes(Number(id.slice("upgrade-".length))) && !leads.has(id)) missingPushes++
    }
    return { events, pushes: missingPushes }
  })
  let left = yield* missing
  while ((left.events > 0 || left.pushes > 0) && performance.now() - drainStart < drainMs) {
    yield* Effect.sleep("500 millis")
    left = yield* missing
  }
  const drainedS = (performance.now() - drainStart) / 1000
  // Late doubles: a second delivery or push would come within a few seconds of the first.
  yield* Effect.sleep("3 seconds")
  left = yield* missing
  const leads = yield* leadsByCall
  phases.at(-1)!.endedMs = performance.now()

  let doubledEvents = 0
  for (const n of receiver.arrivals.distinctByCall.values()) if (n > 1) doubledEvents++
  let doubledPushes = 0
  for (const n of leads.values()) if (n > 1) doubledPushes++
  const errors = [oldA, oldB].map((r) => ({ name: r.name, ...ReplicaLog.errorsAfter(r.log, offsets.get(r.name) ?? 0) }))
  const badExits = [...exits.values()].filter((how) => how !== "code 0").length
  const statuses = new Set<number | "no answer">()
  for (const byStatus of load.tally.byPhase.values()) for (const s of byStatus.keys()) statuses.add(s)
  const outside = [...load.tally.byPhase.values()].flatMap((m) => [...m.entries()])
    .filter(([s]) => typeof s === "number" && !Load.CONTRACT_STATUSES.has(s)).reduce((n, [, c]) => n + c, 0)
  const unanswered = [...load.tally.byPhase.values()].reduce((n, m) => n + (m.get("no answer") ?? 0), 0)

  const statusColumns = [...statuses].sort((a, b) => (a === "no answer" ? 1 : b === "no answer" ? -1 : a - b))
  const lines: Array<string> = []
  lines.push(``, `### Upgrade under load: ${fromName} → ${toName}`, ``)
  lines.push(
    `${rate} outcomes/s round robin over the replicas in rotation, one in ${pushEvery} pushed to a CRM bridge before its event; every replica ROLE=all on PostgreSQL ${database.version}; ${Os.cpus().length} CPUs.`,
    ``
  )
  lines.push(`| phase | seconds | ${statusColumns.map(String).join(" | ")} |`)
  lines.push(`|---|---:|${statusColumns.map(() => "---:").join("|")}|`)
  for (const p of phases) {
    const byStatus = load.tally.byPhase.get(p.name)
    lines.push(
      `| ${p.name} | ${((p.endedMs - p.startedMs) / 1000).toFixed(1)} | ${statusColumns.map((s) => String(byStatus?.get(s) ?? 0)).join(" | ")} |`
    )
  }
  const checks: ReadonlyArray<readonly [string, number]> = [
    ["statuses outside the contract", outside],
    ["requests not answered at all", unanswered],
    ["outcomes given up on (no 202 after retries)", load.tally.givenUp.size],
    ["events of a 202 never at the receiver (lost)", left.events],
    ["events under more than one webhook-id (doubled)", doubledEvents],
    ["pushes of a 202 never at the bridge (lost)", left.pushes],
    ["pushes done twice (doubled)", doubledPushes],
    ...errors.map((e) => [`${e.name}: errors logged after new N started`, e.count] as const),
    ["old replicas not exiting 0 on SIGTERM", badExits]
  ]
  lines.push(``, `| check | count |`, `|---|---:|`)
  lines.push(`| outcomes posted / answered 202 | ${load.tally.posted} / ${accepted.size} |`)
  lines.push(`| events delivered / pushes done | ${receiver.arrivals.byCall.size} / ${leads.size} |`)
  lines.push(`| drained (last event and push of a 202 arrived) after the load | ${drainedS.toFixed(1)} s |`)
  lines.push(`| repeats of one webhook-id (at-least-once redelivery, allowed) | ${receiver.arrivals.duplicates} |`)
  for (const [name, count] of checks) lines.push(`| ${name} | ${count} |`)
  const failed = checks.filter(([, count]) => count !== 0)
  lines.push(``, failed.length === 0 ? `Result: pass, ${fromName} runs beside ${toName} during an upgrade.` : `Result: FAIL (${failed.map(([n]) => n).join("; ")}).`)
  if (load.tally.examples.length > 0) lines.push(``, `Answers outside the contract or none (first ${load.tally.examples.length}):`, ...load.tally.examples.map((e) => `  ${e}`))
  for (const e of errors) if (e.examples.length > 0) lines.push(``, `${e.name}'s errors (first ${e.examples.length}):`, ...e.examples.map((l) => `  ${l}`))
  if (keepLogs) lines.push(``, `Replica logs kept in ${logDir}`)
  yield* say(lines.join("\n"))
  if (failed.length > 0) process.exitCode = 1
})

runMain(main)
