/**
 * What the Zapier app's tests run against: `crm-relay serve` as a child
 * process (PGlite in a temporary DATA_DIR, or a fresh schema of DATABASE_URL),
 * a real HTTPS hook receiver on 127.0.0.1 standing in for Zapier's hook URL,
 * and the server's egress trusting the receiver's throwaway CA and allowed
 * only 127.0.0.1 — everything on loopback, ports chosen by the system.
 */
import { TestDatabase } from "@crm-relay/store"
import { Certificate, ServerProcess, WebhookReceiver } from "@crm-relay/testing"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { randomBytes } from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

/** An HTTP answer, read completely. */
export interface Answer {
  readonly status: number
  readonly headers: Headers
  readonly json: unknown
}

/** One JSON request (no retries, no redirects). */
export const request = (method: string, url: string, options: { readonly token?: string; readonly body?: unknown } = {}) =>
  Effect.promise(async (): Promise<Answer> => {
    const headers: Record<string, string> = {}
    if (options.token !== undefined) headers["authorization"] = `Bearer ${options.token}`
    if (options.body !== undefined) headers["content-type"] = "application/json"
    const response = await fetch(url, {
      method,
      redirect: "manual",
      headers,
      ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) })
    })
    const text = await response.text()
    return { status: response.status, headers: response.headers, json: text === "" ? undefined : JSON.parse(text) }
  })

/** The running server and receiver. */
export class Harness extends Context.Tag("test/zapier/Harness")<Harness, {
  readonly publicUrl: string
  readonly receiver: WebhookReceiver.Receiver
  /** A live account without a bridge (its events go out at once); the receiver verifies its signatures. */
  readonly accountId: string
  /** Its first integration key. */
  readonly key: string
  /** A call to the internal API with the server's admin token. */
  readonly admin: (method: string, path: string, body?: unknown) => Effect.Effect<Answer>
}>() {}

// A fresh schema when DATABASE_URL names a PostgreSQL; the server's own PGlite otherwise.
const databaseEnv = Effect.gen(function*() {
  if ((process.env["DATABASE_URL"] ?? "").trim() === "") return {}
  const db = yield* Effect.provide(TestDatabase.TestDatabase, yield* Layer.build(TestDatabase.layer))
  const url = Option.getOrThrow(db.url)
  return { DATABASE_URL: Redacted.value(url), MASTER_KEY: randomBytes(32).toString("base64") }
})

/** The server and the receiver, for the scope of a test file. */
export const layer = Layer.scoped(
  Harness,
  Effect.gen(function*() {
    const dir = yield* Effect.acquireRelease(
      Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "crm-relay-zapier-"))),
      (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
    )
    const ca = yield* Effect.orDie(Certificate.generateAuthority())
    const caFile = Path.join(dir, "ca.pem")
    Fs.writeFileSync(caFile, ca.cert)
    const receiver = yield* Effect.orDie(WebhookReceiver.startReceiver(yield* Effect.orDie(Certificate.issue(ca))))
    const server = yield* Effect.orDie(ServerProcess.startServer({
      dataDir: Path.join(dir, "data"),
      env: { EGRESS_ALLOW_PRIVATE: "127.0.0.1/32", NODE_EXTRA_CA_CERTS: caFile, ...(yield* databaseEnv) }
    }))
    const admin = (method: string, path: string, body?: unknown) =>
      request(method, `${server.adminUrl}${path}`, { token: server.adminToken, body })
    const created = yield* admin("POST", "/v1/accounts", { name: "Zapier test account", mode: "live" })
    const accountId = (created.json as { id: string }).id
    const key = (yield* admin("POST", `/v1/accounts/${accountId}/keys`)).json as { key: string }
    receiver.trust(((yield* admin("GET", `/v1/accounts/${accountId}/signing-secret`)).json as { secret: string }).secret)
    return { publicUrl: server.publicUrl, receiver, accountId, key: key.key, admin }
  })
)

/** Another key of `accountId`. */
export const newKey = (accountId: string) =>
  Effect.flatMap(Harness, ({ admin }) =>
    Effect.map(admin("POST", `/v1/accounts/${accountId}/keys`), (a) => a.json as { id: string; key: string }))
