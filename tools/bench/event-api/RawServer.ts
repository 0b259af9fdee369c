/**
 * The Event API benchmark's baseline: `GET /perform-list` answered by plain
 * `node:http` and a `pg` pool, with crm-relay's three statements (the key by
 * its SHA-256, the per-key rate-limit upsert, the preview read) on the same
 * database and keys, and nothing else: no framework, no effect runtime. It
 * shows what the statements and the HTTP layer cost on this machine.
 *
 * Run by the benchmark as its own process: DATABASE_URL (search_path set),
 * DATABASE_POOL_SIZE and SAMPLE (the synthetic preview as JSON) come from the
 * environment; it listens on a loopback port and writes `{"port":N}` as its
 * first stdout line.
 */
import { createHash, timingSafeEqual } from "node:crypto"
import * as Http from "node:http"
import pg from "pg"

const pool = new pg.Pool({
  connectionString: process.env["DATABASE_URL"] ?? "",
  max: Number(process.env["DATABASE_POOL_SIZE"] ?? "10"),
  application_name: "crm-relay-bench-raw"
})
const sample = process.env["SAMPLE"] ?? "[]"
const WINDOW_MILLIS = 60_000
const LIMIT = 60
const BEARER = /^Bearer +(\S+) *$/i

interface KeyRow {
  readonly id: string
  readonly account_id: string
  readonly secret_hash: Buffer
}
interface PreviewRow {
  readonly id: string
  readonly call_id: string
  readonly source: string
  readonly contact_external_id: string
  readonly appointment_external_id: string | null
}

const send = (response: Http.ServerResponse, status: number, body: string, headers: Record<string, string> = {}) => {
  response.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body), ...headers })
  response.end(body)
}

const performList = async (request: Http.IncomingMessage, response: Http.ServerResponse) => {
  const secret = BEARER.exec(request.headers.authorization ?? "")?.[1] ?? ""
  if (secret.length === 0 || secret.length > 256) return send(response, 401, "{\"error\":\"unauthorized\"}")
  const hash = createHash("sha256").update(secret, "utf8").digest()
  const keys = await pool.query<KeyRow>(
    `SELECT id, account_id, secret_hash FROM integration_keys
            WHERE secret_hash = $1 AND disabled_at IS NULL`,
    [hash]
  )
  const key = keys.rows[0]
  if (key === undefined || key.secret_hash.length !== hash.length || !timingSafeEqual(key.secret_hash, hash)) {
    return send(response, 401, "{\"error\":\"unauthorized\"}")
  }
  const now = Date.now()
  const limits = await pool.query<{ count: number; window_start: Date }>(
    `
          INSERT INTO rate_limits AS r (subject, window_start, count) VALUES ($1, $2, 1)
          ON CONFLICT (subject) DO UPDATE SET
            count = CASE WHEN EXCLUDED.window_start > r.window_start THEN 1 ELSE r.count + 1 END,
            window_start = GREATEST(r.window_start, EXCLUDED.window_start)
          RETURNING count, window_start`,
    [`integration-key:${key.id}`, new Date(Math.floor(now / WINDOW_MILLIS) * WINDOW_MILLIS)]
  )
  const limit = limits.rows[0]!
  if (limit.count > LIMIT) {
    const retryAfter = Math.max(1, Math.ceil((limit.window_start.getTime() + WINDOW_MILLIS - now) / 1000))
    return send(response, 429, JSON.stringify({ error: "rate limited", retryAfterSeconds: retryAfter }), { "retry-after": String(retryAfter) })
  }
  const rows = await pool.query<PreviewRow>(
    `SELECT DISTINCT ON (created_at, call_id, event)
              id, call_id, source, contact_external_id, appointment_external_id
            FROM deliveries WHERE account_id = $1 AND NOT test
            ORDER BY created_at DESC, call_id, event, seq DESC
            LIMIT $2`,
    [key.account_id, 3]
  )
  if (rows.rows.length === 0) return send(response, 200, sample)
  send(
    response,
    200,
    JSON.stringify(rows.rows.map((row) => ({
      id: row.id,
      call_id: row.call_id,
      source: row.source,
      contact: { external_id: row.contact_external_id },
      job_type: "",
      summary: "",
      booked: row.appointment_external_id !== null && row.appointment_external_id !== ""
    })))
  )
}

const server = Http.createServer((request, response) => {
  if (request.method !== "GET" || request.url?.split("?")[0] !== "/perform-list") return send(response, 404, "{\"error\":\"not found\"}")
  performList(request, response).catch((error: unknown) => send(response, 500, JSON.stringify({ error: String(error) })))
})
server.listen(0, "127.0.0.1", () => {
  const address = server.address()
  process.stdout.write(`${JSON.stringify({ port: typeof address === "object" && address !== null ? address.port : 0 })}\n`)
})
process.once("SIGTERM", () => {
  server.close()
  server.closeAllConnections()
  void pool.end()
})
