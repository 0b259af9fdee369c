/**
 * Start-up time and memory of the built `crm-relay` binary (what `npm start`
 * and operators run), against a bare Node start on the same machine:
 *
 *   npm run build && npm run bench:startup -- [--rounds 7] [--idle-ms 2000] [--bin PATH]
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npm run bench:startup
 *
 * Each round runs, one after the other (so a load on the machine hits every
 * case alike): `node -e 0`; `crm-relay --help`; `crm-relay serve` until its
 * first `GET /readyz` 200, on an embedded (PGlite) data directory that
 * already exists; and, with DATABASE_URL, the same on a fresh schema of that
 * PostgreSQL (migrated before the first round). Prints per case the median
 * wall time (spawn → exit, or spawn → first 200), the CPU time it took (on a
 * busy machine the steadier figure), peak RSS (VmHWM; for the short runs
 * through /usr/bin/time when the machine has it), the RSS of the idle server
 * `--idle-ms` after it is ready, the ratios to a bare Node start, and
 * whether each case meets its goal (issue 9's table).
 * `--bin` measures another checkout's `apps/server/bin/crm-relay.js` instead,
 * or the release's single executable (`--bin release/crm-relay`: any path
 * not ending in .js runs as a program of its own, without this Node).
 * `--baseline PATH` (another build's `apps/server/bin/crm-relay.js`, or an executable) runs
 * every crm-relay case with that build too, on a data directory and a schema
 * of its own, the two builds' order flipping every round, and prints this
 * build against it: on a machine whose speed drifts, only builds measured in
 * one run compare. The data directories and the schemas are removed at the end.
 *
 * `--instructions` counts instead of timing: every case runs under
 * valgrind's callgrind, and the figure is the number of instructions the
 * process executed (all its threads) until it exited or, for `serve`, logged
 * that it is serving (see serveUntilReady). Each start is some 50 times
 * slower, but the count varies by 1 to 4 % from one run to the next (V8's
 * background threads), whatever else the machine is doing, where wall and
 * CPU times here drift by 10 to 25 % within the hour. One round by default; needs `valgrind`
 * (Debian: `apt-get install valgrind`). The goals are wall times, so this
 * mode judges none.
 */
import { Config, Console, Data, Duration, Effect, Option, Redacted } from "effect"
import * as ChildProcess from "node:child_process"
import { randomBytes } from "node:crypto"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as Argv from "../support/Argv.js"
import { freshSchema } from "../support/BenchDatabase.js"
import { runMain } from "../support/runMain.js"

const BUILT = fileURLToPath(new URL("../../../apps/server/bin/crm-relay.js", import.meta.url))
/** `--bin PATH`: another checkout's binary to compare with (this checkout's by default). */
const BIN = Argv.text("bin") ?? BUILT
/** `--baseline PATH`: another build measured beside this one, round by round. */
const BASELINE = Argv.text("baseline")
const TIME = "/usr/bin/time"

/** `--instructions`: count instructions under callgrind instead of timing (see above). */
const INSTRUCTIONS = Argv.flag("instructions")
const rounds = Argv.integer("rounds", INSTRUCTIONS ? 1 : 7)
const idleMs = Argv.integer("idle-ms", 2000, 0)

/** A run did not end as it should; `message` says how. */
class RunFailed extends Data.TaggedError("RunFailed")<{ readonly message: string }> {}

/**
 * One measured run: wall time, CPU time (user + system), peak RSS and (for
 * servers) RSS when idle, in ms and MiB; with `--instructions`, the
 * instructions executed (and the rest NaN).
 */
interface Sample {
  readonly ms: number
  readonly cpuMs: number
  readonly peakMiB: number
  readonly idleMiB: number
  readonly instructions: number
}

/** What a run under `--instructions` measures: nothing but its instructions. */
const counted = (instructions: number): Sample => ({
  ms: Number.NaN,
  cpuMs: Number.NaN,
  peakMiB: Number.NaN,
  idleMiB: Number.NaN,
  instructions
})

/**
 * How to start `args`: a script (`….js`, or Node's own options) with this Node; anything else (the
 * release's single executable: `--bin release/crm-relay`, `--baseline …`) is a program of its own.
 */
const startOf = (args: ReadonlyArray<string>): readonly [string, ReadonlyArray<string>] =>
  args[0] === undefined || args[0].startsWith("-") || args[0].endsWith(".js") ? [process.execPath, args] : [args[0], args.slice(1)]

/** Where callgrind writes its counts (`--instructions`): one file per process, and per dump. */
const callgrindDir = INSTRUCTIONS ? Fs.mkdtempSync(Path.join(Os.tmpdir(), "crm-relay-callgrind-")) : ""

/** `valgrind` with callgrind, writing its counts for process PID to `callgrindDir/cg.PID` (`.N` for a dump). */
const underCallgrind = (argv: ReadonlyArray<string>): [string, Array<string>] => [
  "valgrind",
  ["--tool=callgrind", `--callgrind-out-file=${Path.join(callgrindDir, "cg.%p")}`, ...startOf(argv).flat()]
]

/** The instructions callgrind counted for `pid`: in its dump `part` (1: the first), or at its exit (0). */
const instructionsOf = (pid: number, part: number): number => {
  const file = Path.join(callgrindDir, part === 0 ? `cg.${pid}` : `cg.${pid}.${part}`)
  const text = Fs.readFileSync(file, "utf8")
  Fs.rmSync(file, { force: true })
  return Number(/^(?:summary|totals): (\d+)/m.exec(text)?.[1] ?? Number.NaN)
}

const hasTime = Fs.existsSync(TIME)


const statusKiB = (pid: number, field: "VmHWM" | "VmRSS"): number =>
  Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(Fs.readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? Number.NaN)

/** CPU time of `pid` so far (utime + stime of /proc/PID/stat, in clock ticks of 10 ms). */
const cpuMsOf = (pid: number): number => {
  const fields = Fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? []
  return (Number(fields[11]) + Number(fields[12])) * 10
}

/**
 * Runs `node ...args` to its end (exit code 0); the peak RSS comes from
 * /usr/bin/time when present. Under callgrind when `count` (`--instructions`;
 * never for preparing).
 */
const runToEnd = (args: ReadonlyArray<string>, env: Record<string, string>, count = INSTRUCTIONS): Effect.Effect<Sample, RunFailed> =>
  Effect.async<Sample, RunFailed>((resume) => {
    const [command, argv] = count
      ? underCallgrind(args)
      : hasTime
      ? [TIME, ["-f", "%M %U %S", ...startOf(args).flat()]]
      : startOf(args)
    const started = performance.now()
    const child = ChildProcess.spawn(command, argv, { env, stdio: ["ignore", "ignore", "pipe"] })
    let stderr = ""
    child.stderr.on("data", (chunk) => (stderr += chunk))
    child.on("exit", (code) => {
      const ms = performance.now() - started
      if (code !== 0) return resume(Effect.fail(new RunFailed({ message: `node ${args.join(" ")} exited ${code}: ${stderr}` })))
      if (count) return resume(Effect.succeed(counted(instructionsOf(child.pid!, 0))))
      const [peakKiB, user, system] = hasTime ? (stderr.trim().split("\n").at(-1) ?? "").split(" ").map(Number) : []
      resume(Effect.succeed({
        ms,
        cpuMs: ((user ?? Number.NaN) + (system ?? Number.NaN)) * 1000,
        peakMiB: (peakKiB ?? Number.NaN) / 1024,
        idleMiB: Number.NaN,
        instructions: Number.NaN
      }))
    })
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/** A free loopback port (the server's internal API listens there, so readiness is polled without waiting for a file). */
const freePort = Effect.async<number>((resume) => {
  const server = Net.createServer()
  server.listen(0, "127.0.0.1", () => {
    const port = (server.address() as Net.AddressInfo).port
    server.close(() => resume(Effect.succeed(port)))
  })
})

/** One `GET /readyz`: its status, or 0 when nothing answers yet. */
const readyz = (port: number) =>
  Effect.async<number>((resume) => {
    const request = Http.get({ host: "127.0.0.1", port, path: "/readyz", agent: false }, (response) => {
      response.resume()
      resume(Effect.succeed(response.statusCode ?? 0))
    })
    request.on("error", () => resume(Effect.succeed(0)))
  })

/** The line `serve` logs (at Info) once every listener is up and the workers have started. */
const SERVING = `"msg":"crm-relay is serving"`

/**
 * Starts `bin serve`, measures spawn → first /readyz 200, its RSS after
 * `idle` ms (`--idle-ms`), and stops it (SIGTERM). Under callgrind when `count`: the
 * instructions until it logs that it is serving (every listener up, the
 * workers started). Not until /readyz: stretched some 50 times, the start
 * reaches the timers it arms (the collection a second after start, the
 * workers' polls) before the probe's answer, and the count would depend on
 * how slow the machine was.
 */
const serveUntilReady = (bin: string, env: Record<string, string>, count = INSTRUCTIONS, idle = idleMs): Effect.Effect<Sample, RunFailed> =>
  Effect.gen(function*() {
    const adminPort = yield* freePort
    const started = performance.now()
    const [command, argv] = count ? underCallgrind([bin, "serve"]) : startOf([bin, "serve"])
    const child = ChildProcess.spawn(command, argv, {
      env: { ...env, ADMIN_PORT: String(adminPort), PORT: "0", PORTAL_PORT: "0", LOG_LEVEL: count ? "Info" : "Warning" },
      stdio: ["ignore", count ? "pipe" : "ignore", "pipe"]
    })
    let stderr = ""
    child.stderr!.on("data", (chunk) => (stderr += chunk))
    let serving: number | undefined
    if (count) {
      let stdout = ""
      child.stdout!.on("data", (chunk) => {
        if (serving !== undefined) return
        stdout += chunk
        if (!stdout.includes(SERVING)) return
        // At once, while the process has hardly gone on.
        ChildProcess.execFileSync("callgrind_control", ["--dump=serving", String(child.pid)], { stdio: "ignore" })
        serving = instructionsOf(child.pid!, 1)
      })
    }
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
    const stop = Effect.promise(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM")
      return exited
    }).pipe(Effect.timeout(Duration.seconds(30)), Effect.ignore, Effect.zipRight(Effect.sync(() => child.kill("SIGKILL"))))
    return yield* Effect.gen(function*() {
      while (count ? serving === undefined : (yield* readyz(adminPort)) !== 200) {
        if (child.exitCode !== null) return yield* new RunFailed({ message: `crm-relay serve exited ${child.exitCode}: ${stderr}` })
        if (performance.now() - started > readyWithin) {
          return yield* new RunFailed({ message: `crm-relay serve was not ready within ${readyWithin / 1000} s` })
        }
        yield* Effect.sleep(Duration.millis(5))
      }
      if (serving !== undefined) return counted(serving)
      const ms = performance.now() - started
      const cpuMs = cpuMsOf(child.pid!)
      yield* Effect.sleep(Duration.millis(idle))
      return {
        ms,
        cpuMs,
        peakMiB: statusKiB(child.pid!, "VmHWM") / 1024,
        idleMiB: statusKiB(child.pid!, "VmRSS") / 1024,
        instructions: Number.NaN
      }
    }).pipe(Effect.ensuring(stop))
  })

/** How long a start may take: under callgrind, some 50 times longer. */
const readyWithin = INSTRUCTIONS ? 1_800_000 : 300_000

/** How the baseline build's cases are named. */
const BASELINE_LABEL = " [baseline]"

/** Issue 9's goals per case (wall time to exit or to the first /readyz 200; peak or idle RSS). */
interface Goal {
  readonly ms: number
  readonly peakMiB?: number
  readonly idleMiB?: number
}
const goals: Readonly<Record<string, Goal>> = {
  "crm-relay --help": { ms: 350, peakMiB: 120 },
  "serve → /readyz 200, embedded": { ms: 1000, idleMiB: 250 },
  "serve → /readyz 200, PostgreSQL": { ms: 600, idleMiB: 110 }
}

/** `wall 412 ms ≤ 350: not met`, one per figure the goal names. */
const goalLine = (name: string, goal: Goal, s: Omit<Sample, "cpuMs">): string => {
  const check = (label: string, value: number, limit: number, unit: string) =>
    `${label} ${fmt(value)} ${unit} ≤ ${limit}: ${Number.isNaN(value) ? "not measured" : value <= limit ? "met" : "NOT met"}`
  const checks = [
    check("wall", s.ms, goal.ms, "ms"),
    ...(goal.peakMiB === undefined ? [] : [check("peak", s.peakMiB, goal.peakMiB, "MiB")]),
    ...(goal.idleMiB === undefined ? [] : [check("idle", s.idleMiB, goal.idleMiB, "MiB")])
  ]
  return `goal ${name}: ${checks.join("; ")}`
}

const median = (values: ReadonlyArray<number>): number => {
  const sorted = values.filter((v) => !Number.isNaN(v)).sort((a, b) => a - b)
  if (sorted.length === 0) return Number.NaN
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

const fmt = (value: number, digits = 0) => (Number.isNaN(value) ? "-" : value.toFixed(digits))

/** Millions, to one decimal. */
const millions = (value: number): string => fmt(value / 1e6, 1)

/** The `--instructions` report: per case, and against a bare start and the baseline; no goals (they are wall times). */
const reportInstructions = (summary: ReadonlyMap<string, Sample>, measured: ReadonlyArray<string>, withBaseline: boolean) =>
  Effect.gen(function*() {
    yield* Console.log(`\ninstructions executed, medians of ${rounds} round(s) under callgrind (Node ${process.version}):`)
    yield* Console.log(`${"case".padEnd(42)} ${"M instructions".padStart(15)}`)
    for (const [name, s] of summary) yield* Console.log(`${name.padEnd(42)} ${millions(s.instructions).padStart(15)}`)
    const node = summary.get("node -e 0")!
    for (const [name, s] of summary) {
      if (name !== "node -e 0") yield* Console.log(`${name} / node -e 0: ${fmt(s.instructions / node.instructions, 1)}×`)
    }
    if (withBaseline) {
      yield* Console.log(`baseline: ${BASELINE}`)
      for (const name of measured) {
        const ratio = summary.get(name)!.instructions / summary.get(name + BASELINE_LABEL)!.instructions
        yield* Console.log(`${name}, this build / baseline: ${fmt(ratio, 3)}× the instructions`)
      }
    }
    yield* Console.log("(serve: counted until it logs `crm-relay is serving`, its listeners up; the goals are wall times: run without --instructions to judge them)")
  })

const main = Effect.gen(function*() {
  if (BIN === BUILT && !Fs.existsSync(Path.join(Path.dirname(BIN), "..", "dist", "main.js"))) {
    return yield* new RunFailed({ message: "The binary is not built: run `npm run build` first." })
  }
  if (INSTRUCTIONS) {
    for (const tool of ["valgrind", "callgrind_control"]) {
      if (ChildProcess.spawnSync(tool, ["--version"], { stdio: "ignore" }).error !== undefined) {
        return yield* new RunFailed({ message: `--instructions needs ${tool} (valgrind's; on Debian: apt-get install valgrind).` })
      }
    }
    yield* Effect.addFinalizer(() => Effect.sync(() => Fs.rmSync(callgrindDir, { recursive: true, force: true })))
  }
  const base = yield* Config.option(Config.redacted("DATABASE_URL"))
  const dataDir = yield* Effect.acquireRelease(
    Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "crm-relay-startup-"))),
    (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
  )
  const common = {
    PATH: process.env["PATH"] ?? "",
    HOME: process.env["HOME"] ?? Os.tmpdir(),
    ADMIN_TOKEN: randomBytes(24).toString("hex"),
    MASTER_KEY: randomBytes(32).toString("base64")
  }

  /** One build's crm-relay cases, on its own data directory and schema, prepared as any start but the first finds them. */
  const casesOf = (bin: string, label: string) =>
    Effect.gen(function*() {
      const embedded = { ...common, DATA_DIR: Path.join(dataDir, `embedded${label}`) }
      const postgres = yield* Option.match(base, {
        onNone: () => Effect.succeed(Option.none<Record<string, string>>()),
        onSome: (url) =>
          Effect.map(freshSchema(url), (database) =>
            Option.some({ ...common, DATA_DIR: Path.join(dataDir, `postgres${label}`), DATABASE_URL: Redacted.value(database.url) }))
      })
      // The embedded database and the schema exist before the first round, as on any start but the first.
      yield* Console.log(`preparing${label}: crm-relay migrate (embedded` + (Option.isSome(postgres) ? " and PostgreSQL)" : ")"))
      yield* runToEnd([bin, "migrate"], embedded, false)
      if (Option.isSome(postgres)) yield* runToEnd([bin, "migrate"], postgres.value, false)
      // A first start fills Node's compile cache, as the first start after an install does; `serve`
      // saves its script's compiled code a second after start (bin/crm-relay.js): it runs for two.
      yield* runToEnd([bin, "--help"], embedded, false)
      yield* serveUntilReady(bin, embedded, false, Math.max(idleMs, 2000))
      const cases: ReadonlyArray<readonly [name: string, run: Effect.Effect<Sample, RunFailed>]> = [
        [`crm-relay --help${label}`, runToEnd([bin, "--help"], embedded)],
        [`serve → /readyz 200, embedded${label}`, serveUntilReady(bin, embedded)],
        ...Option.match(postgres, {
          onNone: () => [],
          onSome: (env) => [[`serve → /readyz 200, PostgreSQL${label}`, serveUntilReady(bin, env)] as const]
        })
      ]
      return { cases, postgres: Option.isSome(postgres) }
    })
  const measured = yield* casesOf(BIN, "")
  const baseline = BASELINE === undefined ? undefined : yield* casesOf(BASELINE, BASELINE_LABEL)
  const bare = [["node -e 0", runToEnd(["-e", "0"], common)] as const]
  const cases = [...bare, ...measured.cases, ...(baseline?.cases ?? [])]
  /** A round's order: the bare start, then the two builds' cases, the first of them alternating. */
  const order = (round: number) =>
    baseline === undefined || round % 2 === 1 ? cases : [...bare, ...baseline.cases, ...measured.cases]

  const samples = new Map<string, Array<Sample>>(cases.map(([name]) => [name, []]))
  for (let round = 1; round <= rounds; round++) {
    for (const [name, run] of order(round)) samples.get(name)!.push(yield* run)
    const last = (name: string) => samples.get(name)!.at(-1)!
    yield* Console.log(
      `round ${round}/${rounds}: ` +
        cases.map(([name]) => INSTRUCTIONS ? `${name} ${millions(last(name).instructions)} M instructions` : `${name} ${fmt(last(name).ms)} ms`)
          .join(", ")
    )
  }

  const summary = new Map(cases.map(([name]) => {
    const list = samples.get(name)!
    return [name, {
      ms: median(list.map((s) => s.ms)),
      cpuMs: median(list.map((s) => s.cpuMs)),
      peakMiB: median(list.map((s) => s.peakMiB)),
      idleMiB: median(list.map((s) => s.idleMiB)),
      instructions: median(list.map((s) => s.instructions))
    }] as const
  }))
  if (INSTRUCTIONS) return yield* reportInstructions(summary, measured.cases.map(([name]) => name), baseline !== undefined)
  yield* Console.log(`\nmedians of ${rounds} rounds (Node ${process.version}, ${Os.cpus().length} CPUs, load average ${Os.loadavg().map((l) => l.toFixed(1)).join(" ")}):`)
  yield* Console.log(`${"case".padEnd(34)} ${"wall ms".padStart(8)} ${"CPU ms".padStart(7)} ${"peak MiB".padStart(9)} ${"idle MiB".padStart(9)}`)
  for (const [name, s] of summary) {
    yield* Console.log(
      `${name.padEnd(34)} ${fmt(s.ms).padStart(8)} ${fmt(s.cpuMs).padStart(7)} ${fmt(s.peakMiB).padStart(9)} ${fmt(s.idleMiB).padStart(9)}`
    )
  }
  const node = summary.get("node -e 0")!
  for (const [name, s] of summary) {
    if (name !== "node -e 0") {
      yield* Console.log(`${name} / node -e 0: wall ${fmt(s.ms / node.ms, 1)}×, CPU ${fmt(s.cpuMs / node.cpuMs, 1)}×`)
    }
  }
  if (baseline !== undefined) {
    yield* Console.log(`baseline: ${BASELINE}`)
    for (const [name] of measured.cases) {
      const s = summary.get(name)!
      const b = summary.get(name + BASELINE_LABEL)!
      yield* Console.log(`${name}, this build / baseline: wall ${fmt(s.ms / b.ms, 2)}×, CPU ${fmt(s.cpuMs / b.cpuMs, 2)}×`)
    }
  }
  for (const [name, s] of summary) {
    const goal = goals[name]
    if (goal !== undefined) yield* Console.log(goalLine(name, goal, s))
  }
  if (!measured.postgres) yield* Console.log("(no DATABASE_URL: the PostgreSQL case was not run)")
  if (!hasTime) yield* Console.log(`(no ${TIME}: no peak RSS for the runs that exit)`)
})

void runMain(main)
