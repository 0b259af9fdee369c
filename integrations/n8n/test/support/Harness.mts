/**
 * What the n8n tests run against: `crm-relay serve` as a child process (PGlite in a temporary
 * DATA_DIR, or a fresh schema of DATABASE_URL) with an account, a key and its signing secret, and a
 * real n8n (N8nServer) with this package installed — everything on loopback, ports chosen free.
 * crm-relay's egress may deliver to 127.0.0.1 and trusts the throwaway CA n8n's certificate
 * chains to, as it would trust a public CA for a real n8n.
 */
import { TestDatabase } from "@crm-relay/store"
import { Certificate, ServerProcess } from "@crm-relay/testing"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { randomBytes } from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { type Answer, request } from "./Https.mjs"
import * as N8nServer from "./N8nServer.mjs"

/** A live account without a bridge (its events go out at once), its integration key and signing secret. */
export interface Account {
  readonly accountId: string
  readonly key: string
  readonly signingSecret: string
}

/** The running crm-relay and n8n. */
export class Harness extends Context.Tag("test/n8n/Harness")<Harness, {
  readonly crm: {
    readonly publicUrl: string
    /** A live account without a bridge: its events go out at once. */
    readonly accountId: string
    readonly key: string
    readonly signingSecret: string
    /** Another live account, its key and signing secret: one with no deliveries yet. */
    readonly newAccount: (name: string) => Effect.Effect<Account>
    /** A call to the internal API with the server's admin token. */
    readonly admin: (method: string, path: string, body?: unknown) => Effect.Effect<Answer>
  }
  readonly n8n: N8nServer.N8n
}>() {}

// A fresh schema when DATABASE_URL names a PostgreSQL; the server's own PGlite otherwise.
const databaseEnv = Effect.gen(function*() {
  if ((process.env["DATABASE_URL"] ?? "").trim() === "") return {}
  const db = yield* Effect.provide(TestDatabase.TestDatabase, yield* Layer.build(TestDatabase.layer))
  const url = Option.getOrThrow(db.url)
  return { DATABASE_URL: Redacted.value(url), MASTER_KEY: randomBytes(32).toString("base64") }
})

const crmRelay = (dir: string, caFile: string) =>
  Effect.gen(function*() {
    const server = yield* Effect.orDie(ServerProcess.startServer({
      dataDir: Path.join(dir, "data"),
      env: { EGRESS_ALLOW_PRIVATE: "127.0.0.1/32", NODE_EXTRA_CA_CERTS: caFile, ...(yield* databaseEnv) }
    }))
    const admin = (method: string, path: string, body?: unknown) =>
      request(method, `${server.adminUrl}${path}`, { body, headers: { authorization: `Bearer ${server.adminToken}` } }).pipe(Effect.orDie)
    const newAccount = (name: string) =>
      Effect.gen(function*() {
        const created = yield* admin("POST", "/v1/accounts", { name, mode: "live" })
        const accountId = (created.json as { id: string }).id
        const { key } = (yield* admin("POST", `/v1/accounts/${accountId}/keys`)).json as { key: string }
        const { secret } = (yield* admin("GET", `/v1/accounts/${accountId}/signing-secret`)).json as { secret: string }
        return { accountId, key, signingSecret: secret }
      })
    return { publicUrl: server.publicUrl, ...(yield* newAccount("n8n test account")), newAccount, admin }
  })

/** crm-relay and n8n, for the scope of a test file (started side by side). */
export const layer = Layer.scoped(
  Harness,
  Effect.gen(function*() {
    const dir = yield* Effect.acquireRelease(
      Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "crm-relay-n8n-"))),
      (dir) => Effect.promise(() => Fs.promises.rm(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 }))
    )
    const ca = yield* Effect.orDie(Certificate.generateAuthority())
    const caFile = Path.join(dir, "ca.pem")
    Fs.writeFileSync(caFile, ca.cert)
    const [crm, n8n] = yield* Effect.all([crmRelay(dir, caFile), N8nServer.start(dir, ca)], { concurrency: 2 })
    return { crm, n8n }
  })
)
