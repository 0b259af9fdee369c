/**
 * The real `crm-relay serve` binary as a child process of a benchmark, on
 * PostgreSQL (or, given no database URL, its embedded database), in a fresh DATA_DIR: started, awaited until it publishes its
 * addresses (DATA_DIR/server.json), and stopped with SIGTERM when the scope
 * ends. A server that exits before it listens fails the run at once; one
 * that exits while the bench waits on it (`whileRunning`) fails the wait.
 */
import { Data, Duration, Effect, Option, Redacted, Schedule, Schema, type Scope } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

/** This checkout's binary. */
export const BIN = fileURLToPath(new URL("../../../apps/server/bin/crm-relay.js", import.meta.url))

/** The binary to run is missing or not built; `message` says which and how to build it. */
export class NotBuilt extends Data.TaggedError("NotBuilt")<{ readonly message: string }> {}

/** Whether `bin` is a release's single executable (a program of its own), not a checkout's `bin/crm-relay.js`. */
export const isExecutable = (bin: string): boolean => !bin.endsWith(".js")

/**
 * `bin` (a checkout's `apps/server/bin/crm-relay.js`) when it can run: the file is there and so is the
 * production build it loads (`../dist/main.js`); otherwise a sentence naming the build command. A
 * release's executable (`release/crm-relay`) needs only to be there.
 */
export const builtBinary = (bin: string) =>
  Effect.suspend(() => {
    const path = Path.resolve(bin)
    if (!Fs.existsSync(path)) return Effect.fail(new NotBuilt({ message: `${path} does not exist: give the path of a checkout's apps/server/bin/crm-relay.js.` }))
    return isExecutable(path) || Fs.existsSync(Path.join(Path.dirname(path), "../dist/main.js"))
      ? Effect.succeed(path)
      : Effect.fail(
        new NotBuilt({
          message: `${path} is not built (no dist/main.js beside its bin/): run \`npx nx run @crm-relay/server:build\` in that checkout first.`
        })
      )
  })

/** The server did not come up: it exited, or published no address in time; `message` says which. */
export class ServerNotListening extends Data.TaggedError("ServerNotListening")<{ readonly message: string }> {}

/** The server exited while a bench was waiting on it; `message` says how it ended. */
export class ServerExited extends Data.TaggedError("ServerExited")<{ readonly message: string }> {}

/** How to run one server. */
export interface ServeOptions {
  /** PostgreSQL; undefined runs the embedded database (PGlite) in the server's fresh DATA_DIR. */
  readonly databaseUrl: Redacted.Redacted | undefined
  readonly pool: number
  readonly adminToken: string
  /** MASTER_KEY: required with DATABASE_URL, and the same for every server of a run. */
  readonly masterKey: string
  /** Writes the server's CPU profile there when it stops (Node's --cpu-prof). */
  readonly cpuProfileDir: string | undefined
  /** Node and V8 flags for the server (NODE_OPTIONS), to compare heap settings in the same run. */
  readonly nodeOptions?: string | undefined
  /** Where the server's log lines (stdout) go: a file descriptor, or nowhere. */
  readonly stdout: number | "ignore"
  /** Where its stderr goes: a file descriptor, or this process's stderr (the default). */
  readonly stderr?: number | "inherit" | undefined
  readonly logLevel: string
  /** More settings (ROLE, EGRESS_ALLOW_PRIVATE, ...). */
  readonly env?: Record<string, string>
  /** How long the SIGTERM at the end may take. */
  readonly stopWithin: Duration.DurationInput
  /** Runs the server under this open-file limit (`ulimit -n` in a shell that then becomes the server). */
  readonly openFileLimit?: number | undefined
  /**
   * Another build's `bin/crm-relay.js` to run (this checkout's by default), to compare two builds in one run,
   * or a release's single executable (any path not ending in .js: run as a program of its own).
   */
  readonly bin?: string | undefined
}

/** A running server: its pid and its two APIs' base URLs. */
export interface RunningServer {
  readonly pid: number
  readonly adminUrl: string
  readonly publicUrl: string
  /**
   * Runs `effect`, failing it with `ServerExited` as soon as the server exits:
   * a wait for deliveries that a dead server will never make ends then, not
   * at its timeout.
   */
  readonly whileRunning: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | ServerExited, R>
  /** How it ended (`code 0`, `signal SIGKILL`), once it has; undefined while it runs. */
  readonly ended: () => string | undefined
}

/** `code 1`, `signal SIGKILL`: how a child process ended. */
const howItEnded = (child: ChildProcess.ChildProcess): string =>
  child.signalCode !== null ? `signal ${child.signalCode}` : `code ${child.exitCode}`

/** NODE_OPTIONS of the server, when it has any. */
const nodeOptions = (options: ServeOptions): Record<string, string> => {
  const flags = [
    ...(options.nodeOptions === undefined ? [] : [options.nodeOptions]),
    ...(options.cpuProfileDir === undefined ? [] : [`--cpu-prof --cpu-prof-dir=${Path.resolve(options.cpuProfileDir)}`])
  ]
  return flags.length === 0 ? {} : { NODE_OPTIONS: flags.join(" ") }
}

/**
 * The heap budget's settings (HEAP_SEMI_SPACE_MIB, HEAP_GROWTH_PERCENT) and glibc's MALLOC_ARENA_MAX (read
 * only when a process starts, so the server cannot set it itself) set where the bench runs, to compare them.
 */
const heapSettings = (): Record<string, string> =>
  Object.fromEntries(
    ["HEAP_SEMI_SPACE_MIB", "HEAP_GROWTH_PERCENT", "MALLOC_ARENA_MAX"].flatMap((name) => {
      const value = process.env[name]
      return value === undefined ? [] : [[name, value]]
    })
  )

const decodeServerFile = Schema.decodeUnknownOption(Schema.parseJson(Schema.Struct({ adminUrl: Schema.String, publicUrl: Schema.String })))

/** `crm-relay serve` for the scope (see the module comment). */
export const serve = (options: ServeOptions): Effect.Effect<RunningServer, ServerNotListening, Scope.Scope> =>
  Effect.gen(function*() {
    const dataDir = yield* Effect.acquireRelease(
      Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "crm-relay-bench-"))),
      (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
    )
    const bin = options.bin ?? BIN
    const command = isExecutable(bin) ? [bin, "serve"] : [process.execPath, bin, "serve"]
    const child = yield* Effect.acquireRelease(
      Effect.sync(() =>
        ChildProcess.spawn(
          options.openFileLimit === undefined ? command[0]! : "/bin/sh",
          options.openFileLimit === undefined
            ? command.slice(1)
            : ["-c", `ulimit -n ${options.openFileLimit} && exec "$0" "$@"`, ...command],
          {
            stdio: ["ignore", options.stdout, options.stderr ?? "inherit"],
            env: {
              PATH: process.env["PATH"] ?? "",
              ...(options.databaseUrl === undefined ? {} : { DATABASE_URL: Redacted.value(options.databaseUrl) }),
              DATABASE_POOL_SIZE: String(options.pool),
              PORT: "0",
              ADMIN_PORT: "0",
              PORTAL_PORT: "0",
              ADMIN_TOKEN: options.adminToken,
              MASTER_KEY: options.masterKey,
              DATA_DIR: dataDir,
              LOG_LEVEL: options.logLevel,
              ...heapSettings(),
              ...options.env,
              ...nodeOptions(options)
            }
          }
        )
      ),
      (child) =>
        Effect.async<void>((resume) => {
          if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
          child.once("exit", () => resume(Effect.void))
          child.kill("SIGTERM")
        }).pipe(Effect.timeout(options.stopWithin), Effect.ignore)
    )
    /** Fails with `error(how it ended)` once the server exits (at once if it has); stops listening when interrupted. */
    const exitOf = <E>(error: (how: string) => E) =>
      Effect.async<never, E>((resume) => {
        const fail = () => resume(Effect.fail(error(howItEnded(child))))
        if (child.exitCode !== null || child.signalCode !== null) return fail()
        child.once("exit", fail)
        return Effect.sync(() => child.off("exit", fail))
      })
    const exited = exitOf((how) => new ServerNotListening({ message: `crm-relay serve exited (${how}) before it listened; its errors are above.` }))
    const readServerFile = Effect.sync(() =>
      Option.liftThrowable(() => Fs.readFileSync(Path.join(dataDir, "server.json"), "utf8"))().pipe(Option.flatMap(decodeServerFile))
    )
    const published = Effect.flatMap(readServerFile, Option.match({
      onNone: () => Effect.fail(new ServerNotListening({ message: "crm-relay serve published no address within 180 s." })),
      onSome: Effect.succeed
    })).pipe(Effect.retry(Schedule.spaced(Duration.millis(200)).pipe(Schedule.upTo(Duration.seconds(180)))))
    const info = yield* Effect.raceFirst(published, exited)
    const died = exitOf((how) =>
      new ServerExited({ message: `crm-relay serve (pid ${child.pid}) exited (${how}) while the bench waited on it; its errors are above.` }))
    return {
      pid: child.pid!,
      ...info,
      whileRunning: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.raceFirst(effect, died),
      ended: () => (child.exitCode !== null || child.signalCode !== null ? howItEnded(child) : undefined)
    }
  })

/** Peak resident set size of `pid` in MiB (Linux: VmHWM). */
export const peakRssMiB = (pid: number) =>
  Effect.sync(() => {
    const status = Fs.readFileSync(`/proc/${pid}/status`, "utf8")
    return Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? Number.NaN) / 1024
  })

/** CPU time `pid` has used so far (user + system), in seconds (Linux: /proc/<pid>/stat, 100 ticks a second). */
export const cpuSeconds = (pid: number) =>
  Effect.sync(() => {
    // The fields after the command name, which may hold spaces, start at its closing parenthesis.
    const fields = Fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
    return (Number(fields[11]) + Number(fields[12])) / 100
  })
