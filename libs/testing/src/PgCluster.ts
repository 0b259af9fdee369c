/**
 * A private PostgreSQL 15 cluster for one test file, as operators run one
 * past a single machine: one etcd (v3 API), two nodes under Patroni with a
 * synchronous standby, and HAProxy routing to the leader through Patroni's
 * REST check (one port closing the sessions of a node it marks down, one
 * keeping them), all on loopback ports of its own under a temporary folder
 * (never the system's 2379/2380, 8008 or 5432). PostgreSQL and Patroni refuse
 * to run as root, so under root they run as `postgres` through `setpriv`,
 * which execs without a fork: the PID held is Patroni's own.
 *
 * Faults: `switchover` (Patroni's REST), `killLeader` (SIGKILL to the
 * leader's Patroni, postmaster and backends at once, as a lost machine), and
 * `start` to bring a killed node back as a standby.
 */
import { Data, Duration, Effect, Option, type Scope } from "effect"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Path from "node:path"
import * as BrokerProcess from "./BrokerProcess.js"
import type { Child } from "./BrokerProcess.js"
import { pause } from "./Eventually.js"
import { type BalancerMode, haproxyConfig, type NodeLayout, patroniYaml } from "./PgClusterConfig.js"

export type { BalancerMode } from "./PgClusterConfig.js"
import * as PgWire from "./PgWire.js"

/** The cluster could not be started, or did not reach the state a step waits for. */
export class ClusterUnavailable extends Data.TaggedError("ClusterUnavailable")<{ readonly message: string }> {}

/** How long the cluster may take to bootstrap (initdb, a base backup, two Patronis) on a busy machine. */
export const START_BOUND = Duration.minutes(5)
/** How long a step (a leader elected, a node back as the synchronous standby) may take. */
export const STEP_BOUND = Duration.minutes(2)

/** A node of the cluster. */
export interface Member extends NodeLayout {
  /** Whether its Patroni runs (false after `killLeader`, until `start`). */
  readonly running: () => boolean
  /** Patroni's and PostgreSQL's last lines. */
  readonly tail: () => string
}

/** A running cluster. */
export interface PgCluster {
  /** `postgres://postgres@127.0.0.1:<port>/postgres`: the leader, through HAProxy in `mode`. */
  readonly url: (mode: BalancerMode) => string
  /** HAProxy's port for `mode`. */
  readonly port: (mode: BalancerMode) => number
  readonly members: ReadonlyArray<Member>
  /** The member holding the leader key and running, as Patroni reports it now. */
  readonly leader: Effect.Effect<Option.Option<string>>
  /** Waits until a member other than `except` is the running leader; answers its name. */
  readonly waitForLeader: (except?: string) => Effect.Effect<string, ClusterUnavailable>
  /** Whether `name` takes a write now (asked directly, not through HAProxy). */
  readonly writable: (name: string) => Effect.Effect<boolean>
  /** Waits until there is a writable leader and the other node is its running synchronous standby. */
  readonly waitHealthy: Effect.Effect<{ readonly leader: string; readonly standby: string }, ClusterUnavailable>
  /** A planned switchover to the synchronous standby (Patroni's POST /switchover); answers the old and new leader. */
  readonly switchover: Effect.Effect<{ readonly from: string; readonly to: string }, ClusterUnavailable>
  /** SIGKILLs the leader's Patroni, postmaster and backends at once; answers its name. */
  readonly killLeader: Effect.Effect<string, ClusterUnavailable>
  /** Starts `name`'s Patroni again (it rejoins as a standby); waits until the cluster is healthy. */
  readonly start: (name: string) => Effect.Effect<void, ClusterUnavailable>
  /** Starts `name`'s Patroni again without waiting: it rejoins in the background (`waitHealthy` says when). */
  readonly launch: (name: string) => Effect.Effect<void, ClusterUnavailable>
}

const PG_BIN_CANDIDATES = ["/usr/lib/postgresql/15/bin"]

const unavailable = (message: string) => new ClusterUnavailable({ message })

/** An HTTP exchange with a Patroni REST API on loopback; None when it does not answer within `timeoutMs`. */
const rest = (port: number, method: string, path: string, body?: unknown, timeoutMs = 3000) =>
  Effect.async<Option.Option<{ readonly status: number; readonly text: string }>>((resume) => {
    const payload = body === undefined ? undefined : JSON.stringify(body)
    const req = Http.request(
      { host: "127.0.0.1", port, method, path, timeout: timeoutMs, headers: payload === undefined ? {} : { "content-type": "application/json" } },
      (res) => {
        let text = ""
        res.on("data", (chunk: Buffer) => (text += chunk.toString()))
        res.on("end", () => resume(Effect.succeed(Option.some({ status: res.statusCode ?? 0, text }))))
        res.on("error", () => resume(Effect.succeed(Option.none())))
      }
    )
    req.on("timeout", () => req.destroy(new Error("timeout")))
    req.on("error", () => resume(Effect.succeed(Option.none())))
    req.end(payload)
    return Effect.sync(() => req.destroy())
  })

interface ClusterMember {
  readonly name: string
  readonly role: string
  readonly state: string
}

/** Polls `check` every 200 ms until it answers Some; fails with `what` and the nodes' last lines after `within`. */
const until = <A>(what: string, check: Effect.Effect<Option.Option<A>>, within: Duration.Duration, tails: () => string) =>
  Effect.gen(function*() {
    const deadline = Date.now() + Duration.toMillis(within)
    while (Date.now() < deadline) {
      const found = yield* check
      if (Option.isSome(found)) return found.value
      yield* pause(200)
    }
    return yield* unavailable(`${what} did not happen within ${Duration.format(within)}:\n${tails()}`)
  })

/** The uid and gid of the `postgres` user, when this process runs as root (PostgreSQL refuses root). */
const postgresUser = (): Option.Option<{ readonly uid: number; readonly gid: number }> => {
  if (process.getuid?.() !== 0) return Option.none()
  const line = Fs.readFileSync("/etc/passwd", "utf8").split("\n").find((l) => l.startsWith("postgres:"))
  if (line === undefined) return Option.none()
  const [, , uid, gid] = line.split(":")
  return Option.some({ uid: Number(uid), gid: Number(gid) })
}

const alive = (pid: number): boolean => {
  try {
    // A zombie still answers a signal: it is dead all the same.
    if (Fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.startsWith("Z")) return false
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** The postmaster's PID from its data folder's postmaster.pid, if it has one. */
const postmasterPid = (dataDir: string): Option.Option<number> => {
  try {
    const pid = Number(Fs.readFileSync(Path.join(dataDir, "postmaster.pid"), "utf8").split("\n")[0])
    return Number.isInteger(pid) && pid > 0 ? Option.some(pid) : Option.none()
  } catch {
    return Option.none()
  }
}

/** The PIDs whose parent is `parent` (a postmaster's backends and auxiliary processes). */
const childrenOf = (parent: number): ReadonlyArray<number> =>
  Fs.readdirSync("/proc").filter((entry) => /^\d+$/.test(entry)).flatMap((entry) => {
    try {
      const stat = Fs.readFileSync(`/proc/${entry}/stat`, "utf8")
      return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === parent ? [Number(entry)] : []
    } catch {
      return []
    }
  })

const killAll = (pids: ReadonlyArray<number>) =>
  Effect.sync(() => {
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGKILL")
      } catch {
        // Already gone.
      }
    }
  })

/** Starts the cluster for the scope, with HAProxy in both modes (a port each). */
export const start: Effect.Effect<PgCluster, ClusterUnavailable, Scope.Scope> = Effect.suspend(() =>
  Effect.gen(function*() {
    const findings = Effect.all([
      BrokerProcess.findProgram("etcd", "etcd-server"),
      BrokerProcess.findProgram("patroni", "patroni"),
      BrokerProcess.findProgram("haproxy", "haproxy"),
      BrokerProcess.findProgram("pg_ctl", "postgresql-15", PG_BIN_CANDIDATES.map((dir) => `${dir}/pg_ctl`))
    ])
    const [etcd, patroni, haproxy, pgCtl] = yield* Effect.mapError(findings, (e) => unavailable(e.message))
    const dir = yield* BrokerProcess.tempDir("crm-relay-pgcluster-")
    const user = postgresUser()
    // The data folders are PostgreSQL's (mode 0700, owned by the user it runs as); so is the folder they sit in.
    if (Option.isSome(user)) Fs.chownSync(dir, user.value.uid, user.value.gid)
    Fs.chmodSync(dir, 0o700)
    const asPostgres = (command: string, args: ReadonlyArray<string>) =>
      Option.isSome(user)
        ? { command: "setpriv", args: ["--reuid=postgres", "--regid=postgres", "--init-groups", command, ...args] }
        : { command, args }
    const env = { PATH: process.env["PATH"] ?? "/usr/bin:/bin", HOME: dir, LANG: "C.UTF-8", LC_ALL: "C.UTF-8" }
    const port = () => BrokerProcess.freePort
    const [etcdPort, etcdPeerPort] = [yield* port(), yield* port()]
    const balancers: Record<BalancerMode, number> = { "closes-sessions": yield* port(), "keeps-sessions": yield* port() }
    const layouts: ReadonlyArray<NodeLayout> = [
      { name: "pg1", pgPort: yield* port(), restPort: yield* port(), dataDir: Path.join(dir, "pg1") },
      { name: "pg2", pgPort: yield* port(), restPort: yield* port(), dataDir: Path.join(dir, "pg2") }
    ]
    const scope = `crm-relay-${Path.basename(dir).slice(-6).toLowerCase()}`
    for (const node of layouts) {
      const file = Path.join(dir, `${node.name}.yml`)
      Fs.writeFileSync(file, patroniYaml({ scope, node, etcdPort, pgBin: Path.dirname(pgCtl), socketDir: dir }))
      if (Option.isSome(user)) Fs.chownSync(file, user.value.uid, user.value.gid)
    }
    Fs.writeFileSync(Path.join(dir, "haproxy.cfg"), haproxyConfig({ ports: balancers, nodes: layouts }))

    // etcd: one member, v3 API only, its data in the folder.
    const etcdDir = Path.join(dir, "etcd")
    const etcdRun = asPostgres(etcd, [
      "--name", "etcd1",
      "--data-dir", etcdDir,
      "--listen-client-urls", `http://127.0.0.1:${etcdPort}`,
      "--advertise-client-urls", `http://127.0.0.1:${etcdPort}`,
      "--listen-peer-urls", `http://127.0.0.1:${etcdPeerPort}`,
      "--initial-advertise-peer-urls", `http://127.0.0.1:${etcdPeerPort}`,
      "--initial-cluster", `etcd1=http://127.0.0.1:${etcdPeerPort}`,
      "--enable-v2=false"
    ])
    const etcdChild = yield* Effect.acquireRelease(
      BrokerProcess.spawn(etcdRun.command, etcdRun.args, { env, cwd: dir }),
      (child) => BrokerProcess.stop(child, Duration.seconds(20))
    )
    yield* BrokerProcess.waitReady(
      "etcd",
      etcdChild,
      Effect.map(rest(etcdPort, "GET", "/health"), Option.exists((r) => r.status === 200 && r.text.includes("true")))
    ).pipe(Effect.mapError((e) => unavailable(e.message)))

    // Patroni per node; a node's postmaster is not Patroni's child in the kill sense (it outlives a SIGKILLed Patroni), so stops reach both.
    const children = new Map<string, Child>()
    const tails = () => layouts.map((node) => `--- ${node.name}:\n${children.get(node.name)?.tail() ?? "(not running)"}`).join("\n")
    const spawnNode = (node: NodeLayout) =>
      Effect.gen(function*() {
        const current = children.get(node.name)
        if (current !== undefined && !current.exited()) return
        const run = asPostgres(patroni, [Path.join(dir, `${node.name}.yml`)])
        children.set(node.name, yield* BrokerProcess.spawn(run.command, run.args, { env, cwd: dir }))
      })
    const stopNode = (node: NodeLayout) =>
      Effect.gen(function*() {
        const child = children.get(node.name)
        // SIGTERM: Patroni stops its PostgreSQL first.
        if (child !== undefined) yield* BrokerProcess.stop(child, Duration.seconds(45))
        yield* Option.match(postmasterPid(node.dataDir), {
          onNone: () => Effect.void,
          onSome: (pid) => alive(pid) ? killAll([pid, ...childrenOf(pid)]) : Effect.void
        })
      })
    yield* Effect.addFinalizer(() => Effect.forEach(layouts, stopNode, { concurrency: "unbounded", discard: true }))
    yield* Effect.forEach(layouts, spawnNode, { discard: true })

    const members: ReadonlyArray<Member> = layouts.map((node) => ({
      ...node,
      running: () => children.get(node.name)?.exited() === false,
      tail: () => children.get(node.name)?.tail() ?? ""
    }))
    const layoutOf = (name: string) => layouts.find((node) => node.name === name)!

    // The cluster as the first Patroni that answers reports it.
    const clusterView = Effect.gen(function*() {
      for (const node of layouts) {
        const answer = yield* rest(node.restPort, "GET", "/cluster")
        if (Option.isSome(answer) && answer.value.status === 200) {
          try {
            return Option.some((JSON.parse(answer.value.text) as { members: ReadonlyArray<ClusterMember> }).members)
          } catch {
            continue
          }
        }
      }
      return Option.none<ReadonlyArray<ClusterMember>>()
    })
    const writable = (name: string) =>
      Effect.map(PgWire.query(layoutOf(name).pgPort, "SELECT txid_current()"), (answer) => answer._tag === "Rows")
    // The leader is the member whose own Patroni answers 200 on /primary (what HAProxy asks).
    const leader = Effect.gen(function*() {
      for (const node of layouts) {
        const answer = yield* rest(node.restPort, "GET", "/primary")
        if (Option.exists(answer, (a) => a.status === 200)) return Option.some(node.name)
      }
      return Option.none<string>()
    })
    const waitForLeader = (except?: string) =>
      until(`A leader other than ${except ?? "none"}`, Effect.map(leader, Option.filter((name) => name !== except)), STEP_BOUND, tails)
    const healthy = Effect.gen(function*() {
      const view = yield* clusterView
      if (Option.isNone(view)) return Option.none()
      const lead = view.value.find((m) => m.role === "leader" && m.state === "running")
      const standby = view.value.find((m) => m.role === "sync_standby" && (m.state === "running" || m.state === "streaming"))
      if (lead === undefined || standby === undefined) return Option.none()
      if (!(yield* writable(lead.name))) return Option.none()
      // HAProxy routes to it in both modes: a connection through it lands on a server out of recovery.
      for (const port of Object.values(balancers)) {
        const through = yield* PgWire.query(port, "SELECT pg_is_in_recovery()")
        if (through._tag !== "Rows" || through.rows[0]?.[0] !== "f") return Option.none()
      }
      return Option.some({ leader: lead.name, standby: standby.name })
    })
    const waitHealthy = until("A writable leader with a running synchronous standby, reached through HAProxy", healthy, STEP_BOUND, tails)

    const haproxyRun = { command: haproxy, args: ["-db", "-f", Path.join(dir, "haproxy.cfg")] }
    const haproxyChild = yield* Effect.acquireRelease(
      BrokerProcess.spawn(haproxyRun.command, haproxyRun.args, { env, cwd: dir }),
      (child) => BrokerProcess.stop(child, Duration.seconds(10))
    )
    yield* BrokerProcess.waitReady("haproxy", haproxyChild, Effect.map(
      Effect.all(Object.values(balancers).map(BrokerProcess.isListening)),
      (listening) => listening.every((up) => up)
    )).pipe(
      Effect.mapError((e) => unavailable(e.message))
    )
    yield* until("The cluster's bootstrap (a leader and its synchronous standby)", healthy, START_BOUND, tails)

    const switchover = Effect.gen(function*() {
      const { leader: from, standby: to } = yield* waitHealthy
      // Patroni answers once the switchover is done (the old leader demoted, the candidate promoted).
      const answer = yield* rest(layoutOf(from).restPort, "POST", "/switchover", { leader: from, candidate: to }, 60_000)
      if (!Option.exists(answer, (a) => a.status === 200)) {
        return yield* unavailable(`Patroni refused the switchover from ${from} to ${to}: ${Option.match(answer, { onNone: () => "no answer", onSome: (a) => `${a.status} ${a.text}` })}`)
      }
      return { from, to }
    })

    const killLeader = Effect.gen(function*() {
      const { leader: name } = yield* waitHealthy
      const node = layoutOf(name)
      const child = children.get(name)!
      const postmaster = postmasterPid(node.dataDir)
      const backends = Option.match(postmaster, { onNone: () => [], onSome: childrenOf })
      const pids = [child.process.pid!, ...Option.toArray(postmaster), ...backends]
      yield* killAll(pids)
      yield* until(`${name}'s processes gone after SIGKILL`, Effect.sync(() => pids.some(alive) ? Option.none() : Option.some(true)), STEP_BOUND, tails)
      return name
    })

    const startMember = (name: string) =>
      Effect.zipRight(spawnNode(layoutOf(name)), Effect.asVoid(waitHealthy))

    return {
      url: (mode) => `postgres://postgres@127.0.0.1:${balancers[mode]}/postgres`,
      port: (mode) => balancers[mode],
      members,
      leader,
      waitForLeader,
      writable,
      waitHealthy,
      switchover,
      killLeader,
      start: startMember,
      launch: (name) => spawnNode(layoutOf(name))
    } satisfies PgCluster
  }))
