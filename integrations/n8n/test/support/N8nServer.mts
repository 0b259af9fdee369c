/**
 * A real n8n (the pinned `n8n` of tools/n8n, installed by tools/n8n/install.sh) for the scope of a
 * test file: HTTPS on 127.0.0.1 with a certificate of the test's CA, its task broker on a port of
 * its own (two runs never collide on the default 5679), its own user folder and SQLite database,
 * no telemetry, and this package installed in its nodes folder from the tarball `npm pack` makes
 * (what is tested is what is published). Once it answers, the owner is set up and an API key
 * made through n8n's REST API, as a user would in the editor.
 */
import { BrokerProcess, Certificate, Eventually } from "@crm-relay/testing"
import { Duration, Effect, Schedule } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { type Answer, request } from "./Https.mjs"

const PACKAGE_DIR = Path.join(import.meta.dirname, "..", "..")
const N8N_BIN = Path.join(PACKAGE_DIR, "..", "..", "tools", "n8n", "node_modules", "n8n", "bin", "n8n")

/** A fresh SQLite database migrates for about a minute on an idle machine: a bound against a hang. */
const START_BOUND = Duration.minutes(10)

/** The node types as n8n names the community package's nodes. */
export const TYPES = { trigger: "n8n-nodes-crm-relay.crmRelayTrigger", action: "n8n-nodes-crm-relay.crmRelay" } as const

/** The owner the test sets up (and signs in as in the browser). */
export const OWNER = { email: "owner@crm-relay.test", firstName: "Test", lastName: "Owner", password: "Relay-test-2041" } as const

/** A running n8n, its owner signed in and an API key made. */
export interface N8n {
  /** `https://127.0.0.1:<port>` */
  readonly url: string
  /** The CA its certificate chains to. */
  readonly ca: string
  /** A call to its REST API (`/rest…`) as the owner signed in to the editor. */
  readonly rest: (method: string, path: string, body?: unknown) => Effect.Effect<Answer>
  /** A call to its public API (`/api/v1…`) with the API key. */
  readonly api: (method: string, path: string, body?: unknown) => Effect.Effect<Answer, Error>
  /** A POST to `url` as a receiver of deliveries would get it. */
  readonly post: (url: string, raw: string, headers: Record<string, string>) => Effect.Effect<Answer, Error>
  /** A GET of `url` (n8n's, or another over plain http). */
  readonly get: (url: string, headers?: Record<string, string>) => Effect.Effect<Answer, Error>
  /** What n8n printed lately. */
  readonly tail: () => string
  /** Whether n8n has printed `text` since it started (its nodes' log lines included). */
  readonly printed: (text: string) => boolean
  /** The lines n8n has printed that match `pattern`: what a failed test shows of n8n's side. */
  readonly lines: (pattern: RegExp) => string
}

// Packs the package as npm would publish it and unpacks it where a manual install puts it
// (`npm install n8n-nodes-crm-relay` in n8n's nodes folder), so n8n loads it as the community
// package users get, named `n8n-nodes-crm-relay.…`. (A folder given in N8N_CUSTOM_EXTENSIONS loads
// as `CUSTOM.…`, and n8n 2.41.1 runs no node's credential test (`testedBy`) for such nodes.)
const installInto = (nodesDir: string) =>
  Effect.sync(() => {
    Fs.mkdirSync(nodesDir, { recursive: true })
    const packed = ChildProcess.execFileSync("npm", ["pack", "--json", "--pack-destination", nodesDir], { cwd: PACKAGE_DIR, encoding: "utf8" })
    const [{ filename }] = JSON.parse(packed) as [{ filename: string }]
    const target = Path.join(nodesDir, "node_modules", "n8n-nodes-crm-relay")
    Fs.mkdirSync(target, { recursive: true })
    ChildProcess.execFileSync("tar", ["xzf", Path.join(nodesDir, filename), "-C", target, "--strip-components=1"])
  })

const BROWSER_ID = "crm-relay-n8n-test"

/** n8n for the scope, in `dir`, with a certificate `ca` issues. */
export const start = (dir: string, ca: Certificate.CertificateAuthority) =>
  Effect.gen(function*() {
    const tls = yield* Effect.orDie(Certificate.issue(ca))
    Fs.writeFileSync(Path.join(dir, "n8n-key.pem"), tls.key)
    Fs.writeFileSync(Path.join(dir, "n8n-cert.pem"), tls.cert)
    const home = Path.join(dir, "n8n-home")
    yield* installInto(Path.join(home, ".n8n", "nodes"))
    // n8n trusts the test's CA as a real n8n trusts the public CA that signed its certificate: the
    // trigger delivers a test listen's sample to n8n's own test webhook URL.
    const caFile = Path.join(dir, "n8n-ca.pem")
    Fs.writeFileSync(caFile, ca.cert)
    const [port, brokerPort] = [yield* BrokerProcess.freePort, yield* BrokerProcess.freePort]
    const url = `https://127.0.0.1:${port}`
    const child = yield* Effect.acquireRelease(
      BrokerProcess.spawn(process.execPath, [N8N_BIN, "start"], {
        cwd: dir,
        env: {
          PATH: process.env["PATH"] ?? "",
          HOME: dir,
          N8N_USER_FOLDER: home,
          DB_TYPE: "sqlite",
          N8N_LISTEN_ADDRESS: "127.0.0.1",
          N8N_HOST: "127.0.0.1",
          N8N_PORT: String(port),
          N8N_PROTOCOL: "https",
          NODE_EXTRA_CA_CERTS: caFile,
          N8N_SSL_KEY: Path.join(dir, "n8n-key.pem"),
          N8N_SSL_CERT: Path.join(dir, "n8n-cert.pem"),
          N8N_WEBHOOK_URL: `${url}/`,
          N8N_EDITOR_BASE_URL: `${url}/`,
          N8N_RUNNERS_BROKER_PORT: String(brokerPort),
          N8N_RUNNERS_BROKER_LISTEN_ADDRESS: "127.0.0.1",
          N8N_DIAGNOSTICS_ENABLED: "false",
          N8N_VERSION_NOTIFICATIONS_ENABLED: "false",
          N8N_TEMPLATES_ENABLED: "false",
          N8N_PERSONALIZATION_ENABLED: "false",
          N8N_HIRING_BANNER_ENABLED: "false",
          N8N_ENFORCE_SETTINGS_FILE_PERMISSIONS: "true",
          N8N_LOG_LEVEL: "info",
          N8N_LOG_OUTPUT: "console"
        }
      }),
      (child) => BrokerProcess.stop(child)
    )
    let printed = ""
    const keep = (chunk: Buffer) => (printed += chunk.toString())
    child.process.stdout?.on("data", keep)
    child.process.stderr?.on("data", keep)
    const ready = request("GET", `${url}/healthz/readiness`, { ca: ca.cert }).pipe(
      Effect.map((answer) => answer.status === 200),
      Effect.orElseSucceed(() => false)
    )
    const deadline = Date.now() + Duration.toMillis(START_BOUND)
    while (!(yield* ready)) {
      if (child.exited()) return yield* Effect.die(new Error(`n8n exited before it answered:\n${child.tail()}`))
      if (Date.now() > deadline) return yield* Effect.die(new Error(`n8n did not answer within ${Duration.format(START_BOUND)}:\n${child.tail()}`))
      yield* Eventually.pause(500)
    }

    // The owner, as the editor's setup page makes it; the session cookie signs the next calls.
    const rest = (method: string, path: string, body: unknown, cookie?: string) =>
      request(method, `${url}/rest${path}`, {
        ca: ca.cert,
        body,
        headers: { "browser-id": BROWSER_ID, ...(cookie === undefined ? {} : { cookie }) }
      }).pipe(Effect.orDie)
    const setup = yield* rest("POST", "/owner/setup", OWNER)
    if (setup.status !== 200) return yield* Effect.die(new Error(`n8n refused the owner setup (${setup.status}): ${setup.text}`))
    const cookie = String(setup.headers["set-cookie"]?.find((c) => c.startsWith("n8n-auth="))?.split(";")[0])
    const scopes = ((yield* rest("GET", "/api-keys/scopes", undefined, cookie)).json as { data: Array<string> }).data
    const created = yield* rest("POST", "/api-keys", { label: "crm-relay test", expiresAt: null, scopes }, cookie)
    const apiKey = (created.json as { data?: { rawApiKey?: string } }).data?.rawApiKey
    if (apiKey === undefined) return yield* Effect.die(new Error(`n8n made no API key (${created.status}): ${created.text}`))

    const api = (method: string, path: string, body?: unknown) =>
      request(method, `${url}/api/v1${path}`, { ca: ca.cert, body, headers: { "x-n8n-api-key": apiKey } }).pipe(
        // A public API call on a loaded machine: one retry after a refused connection, never on an answer.
        Effect.retry(Schedule.spaced("1 second").pipe(Schedule.compose(Schedule.recurs(2))))
      )
    const post = (target: string, raw: string, headers: Record<string, string>) => request("POST", target, { ca: ca.cert, raw, headers })
    const get = (target: string, headers: Record<string, string> = {}) => request("GET", target, { ca: ca.cert, headers })
    return { url, ca: ca.cert, rest: (method: string, path: string, body?: unknown) => rest(method, path, body, cookie), api, post, get, tail: child.tail, printed: (text: string) => printed.includes(text), lines: (pattern: RegExp) => printed.split("\n").filter((line) => pattern.test(line)).slice(-40).join("\n") } satisfies N8n
  })
