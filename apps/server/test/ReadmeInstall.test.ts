/**
 * The README's install lines for the executable, run as written by bash,
 * twice in a row, as a new operator following the README would: the
 * checksums, the tarball, the keys, `serve`; an account made through the
 * commands from a second shell as the README says; Ctrl-C; then the same
 * lines again, and the account is still there.
 *
 * Issue 41: "Its install line runs `MASTER_KEY=$(openssl rand -base64 32) ./crm-relay serve`, so the
 * second start has a new key and refuses the data. … Every snippet an operator copies must survive a
 * restart. … A test runs the README's install lines twice in a row."
 *
 * The lines run unchanged but for two places: `/etc/crm-relay` and `/var/lib/crm-relay` are the same
 * folders under a temporary root, so nothing of the machine is touched. The ports are the operator's
 * environment (`PORT=0` and the like, loopback), never the defaults. On PostgreSQL (DATABASE_URL set for
 * the suite) the shell has `DATABASE_URL` as well ("Set `DATABASE_URL` to use PostgreSQL instead").
 */
import { describe, expect, layer } from "@effect/vitest"
import { TestDatabase } from "@crm-relay/store"
import { Eventually } from "@crm-relay/testing"
import { Effect, Option, Redacted } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ServerFile from "../src/config/ServerFile.js"
import { PROCESS_TEST_TIMEOUT, SERVE_START_BOUND } from "./support/Cli.js"
import { giveToUser, release, RELEASE, ROOT, user } from "./support/Release.js"
import { tempDir } from "./support/TempDir.js"
import { VERSION } from "../src/config/Version.js"
import { request } from "./support/TestServer.js"

const README = Fs.readFileSync(Path.join(ROOT, "README.md"), "utf8")

/** The first `sh` block after `marker` in `text`. */
const shBlockAfter = (text: string, marker: string): string => {
  const start = text.indexOf(marker)
  expect(start, `the README has "${marker}"`).toBeGreaterThan(-1)
  const block = /^```sh\n([\s\S]*?)^```$/m.exec(text.slice(start))
  expect(block, `an sh block follows "${marker}"`).not.toBeNull()
  return block![1]!
}

// A shell's usual tools (tar, sha256sum, openssl, install); the executable needs none of them.
const PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/** A bash running `script` in `cwd` as the executable's user, in a process group of its own. */
const bash = (script: string, cwd: string, env: Record<string, string>) => {
  const child = ChildProcess.spawn("bash", ["-e", "-o", "pipefail", "-c", script], {
    cwd,
    env,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    ...(user ?? {})
  })
  const printed = { stdout: "", stderr: "", both: "" }
  child.stdout.on("data", (chunk: Buffer) => {
    printed.stdout += chunk.toString()
    printed.both += chunk.toString()
  })
  child.stderr.on("data", (chunk: Buffer) => {
    printed.stderr += chunk.toString()
    printed.both += chunk.toString()
  })
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
  return { child, exited, printed, output: () => printed.both }
}

const groupAlive = (pid: number): boolean => {
  try {
    process.kill(-pid, 0)
    return true
  } catch {
    return false
  }
}

/** A command in a second shell, to its end. */
const secondShell = (script: string, cwd: string, env: Record<string, string>) =>
  Effect.promise(async () => {
    const run = bash(script, cwd, env)
    const code = await run.exited
    return { code, stdout: run.printed.stdout, stderr: run.printed.stderr }
  })

describe("the README's install lines (the executable)", () => {
  // Real time: the test waits on processes and the network, never on the TestClock.
  layer(TestDatabase.layer, { timeout: PROCESS_TEST_TIMEOUT, excludeTestServices: true })((it) => {
    it.scoped("run as written twice in a row: the second start has the same keys and serves the account made after the first", () =>
      Effect.gen(function*() {
        const install = shBlockAfter(README, "**The executable**")
        expect(install).toContain("./crm-relay serve")
        yield* release

        // A temporary root holding the folders the lines name, and the downloaded release files.
        const root = yield* tempDir("crm-relay-install-")
        Fs.chmodSync(root, 0o755)
        const downloads = Path.join(root, "downloads")
        for (const folder of [Path.join(root, "etc"), Path.join(root, "var", "lib"), downloads]) {
          Fs.mkdirSync(folder, { recursive: true })
          giveToUser(folder)
        }
        // The README names the tarball of this version: a release that bumps it updates the README too.
        const tarball = `crm-relay-${VERSION}-linux-x64`
        expect(install).toContain(`${tarball}.tar.gz`)
        for (const file of ["SHA256SUMS", `${tarball}.tar.gz`]) {
          Fs.copyFileSync(Path.join(RELEASE, file), Path.join(downloads, file))
          giveToUser(Path.join(downloads, file))
        }
        const inRoot = (text: string) =>
          text.replaceAll("/etc/crm-relay", `${root}/etc/crm-relay`).replaceAll("/var/lib/crm-relay", `${root}/var/lib/crm-relay`)
        const script = inRoot(install)
        const dataDir = `${root}/var/lib/crm-relay`
        const envFile = `${root}/etc/crm-relay/crm-relay.env`
        const folder = Path.join(downloads, tarball)

        const db = yield* TestDatabase.TestDatabase
        const env: Record<string, string> = {
          PATH,
          HOME: downloads,
          PORT: "0",
          ADMIN_PORT: "0",
          PORTAL_PORT: "0",
          LOG_LEVEL: "Warning",
          ...(Option.isSome(db.url) ? { DATABASE_URL: Redacted.value(db.url.value) } : {})
        }
        // "In a second shell, the same `set -a …` line, then the commands": the README's lines that set the
        // shell's environment, in the unpacked folder.
        const environment = install.split("\n").filter((line) => /^(set -a|export) /.test(line)).map(inRoot).join("\n")
        const command = (args: string) => secondShell(`${environment}\n./crm-relay ${args}`, folder, env)

        /** The install lines until `serve` answers `/readyz`; Ctrl-C (SIGINT to the group) at the scope's end. */
        const start = (run: string) =>
          Effect.gen(function*() {
            const shell = yield* Effect.acquireRelease(
              Effect.sync(() => bash(script, downloads, env)),
              ({ child }) =>
                Effect.promise(async () => {
                  const pid = child.pid!
                  if (groupAlive(pid)) process.kill(-pid, "SIGINT")
                  const until = Date.now() + 60_000
                  while (groupAlive(pid) && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 200))
                  if (groupAlive(pid)) process.kill(-pid, "SIGKILL")
                })
            )
            const failed = (why: string) => new Error(`The install lines, ${run} run: ${why}:\n${shell.output()}`)
            // Until serve publishes its address and answers /readyz; a shell that ends first fails with what it printed.
            const whileRunning = (check: Effect.Effect<boolean>) =>
              Effect.suspend(() =>
                shell.child.exitCode !== null || shell.child.signalCode !== null
                  ? Effect.die(failed(`ended (${shell.child.exitCode ?? shell.child.signalCode}) before serve was ready`))
                  : check
              )
            yield* Eventually.eventually(whileRunning(Effect.map(ServerFile.running(dataDir), Option.isSome)), SERVE_START_BOUND)
            const info = Option.getOrThrow(yield* ServerFile.running(dataDir))
            yield* Eventually.eventually(
              whileRunning(Effect.map(Effect.either(request("GET", `${info.adminUrl}/readyz`)), (answer) => answer._tag === "Right" && answer.right.status === 200)),
              SERVE_START_BOUND
            )
            return shell
          })

        // On the embedded database a command that reaches the running server prints only its answer (one that
        // opened a database of its own says so on stderr); on PostgreSQL it writes there itself and logs the audit line.
        const reachedServer = (stderr: string) =>
          Option.isNone(db.url) ? stderr === "" : !/MASTER_KEY|ADMIN_TOKEN/.test(stderr)

        // First run: the keys are made, serve starts, an account is made from a second shell. Soft: a failure
        // here still lets the second start show whether it serves the data.
        const accountId = yield* Effect.scoped(Effect.gen(function*() {
          yield* start("first")
          const created = yield* command(`accounts create --name "Acme Plumbing" --json`)
          expect.soft(created.code, created.stderr).toBe(0)
          expect.soft(reachedServer(created.stderr), `the command used the server's data and keys:\n${created.stderr}`).toBe(true)
          return /"id":"([0-9a-f-]{36})"/.exec(created.stdout)?.[1] ?? "(no account was made)"
        }))
        expect(Option.isNone(yield* ServerFile.running(dataDir)), "serve stopped on Ctrl-C").toBe(true)
        const keysAfterFirst = Fs.existsSync(envFile) ? Fs.readFileSync(envFile, "utf8") : "(no file)"

        // Second run, the same lines: the same keys, and the account is served.
        yield* Effect.scoped(Effect.gen(function*() {
          const shell = yield* start("second")
          expect(shell.output()).not.toContain("is wrapped under master key")
          const listed = yield* command("accounts list --json")
          expect(listed.code, listed.stderr).toBe(0)
          expect(reachedServer(listed.stderr), listed.stderr).toBe(true)
          expect(listed.stdout).toContain(accountId)
        }))
        // The keys are in a file only its owner reads, made once (the second run kept it), and apart from
        // DATA_DIR: a copy of the data carries no key.
        expect(Fs.statSync(envFile).mode & 0o777).toBe(0o600)
        const keys = Fs.readFileSync(envFile, "utf8")
        expect(keys).toMatch(/^MASTER_KEY=[A-Za-z0-9+/]{43}=\nADMIN_TOKEN=\S+\n$/)
        expect(keys, "the second run kept the keys").toBe(keysAfterFirst)
        expect(Fs.existsSync(Path.join(dataDir, "master-key"))).toBe(false)
      }), PROCESS_TEST_TIMEOUT)
  })
})
