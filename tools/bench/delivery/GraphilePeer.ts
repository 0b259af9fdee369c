/**
 * The peer of the delivery benchmark: graphile-worker (a dedicated
 * PostgreSQL job queue) doing the same work per job as crm-relay's delivery
 * worker — sign the stored body per Standard Webhooks (webhook-id = the job
 * id, the same on every retry), POST it over HTTPS (keep-alive) to the
 * receiver, and insert an attempt row — with the same concurrency (32) and
 * pool (10) on the same database. Run as its own process by `main.ts`:
 *
 *   DATABASE_URL=… PEER_SCHEMA=gw_… PEER_SECRET=whsec_… PEER_CA=file \
 *     PEER_CONCURRENCY=32 PEER_POOL=10 npx tsx tools/bench/delivery/GraphilePeer.ts
 *
 * It prints `ready` once it runs; SIGTERM stops it gracefully.
 */
import * as Fs from "node:fs"
import { Logger, run } from "graphile-worker"
import { Webhook } from "standardwebhooks"
import { Agent, request } from "undici"

const env = (name: string): string => {
  const value = process.env[name]
  if (value === undefined || value === "") throw new Error(`Set ${name}.`)
  return value
}

const schema = env("PEER_SCHEMA")
const signer = new Webhook(env("PEER_SECRET"))
const concurrency = Number(env("PEER_CONCURRENCY"))
const agent = new Agent({ connect: { ca: Fs.readFileSync(env("PEER_CA"), "utf8") }, connections: concurrency })
const insertAttempt = `INSERT INTO "${schema}".attempts (job_id, attempt, started_at, status_code, duration_ms, result)
  VALUES ($1, $2, $3, $4, $5, $6)`

interface Payload {
  readonly url: string
  readonly body: string
}

const runner = await run({
  connectionString: env("DATABASE_URL"),
  schema,
  concurrency,
  maxPoolSize: Number(env("PEER_POOL")),
  pollInterval: 2000,
  noHandleSignals: false,
  // Quiet, as the crm-relay servers of the bench log warnings only.
  logger: new Logger(() => () => {}),
  taskList: {
    deliver: async (raw, helpers) => {
      const payload = raw as Payload
      const id = helpers.job.id
      const started = new Date()
      const response = await request(payload.url, {
        method: "POST",
        dispatcher: agent,
        headers: {
          "content-type": "application/json",
          "webhook-id": id,
          "webhook-timestamp": String(Math.floor(started.getTime() / 1000)),
          "webhook-signature": signer.sign(id, started, payload.body)
        },
        body: payload.body
      })
      await response.body.dump()
      const ok = response.statusCode >= 200 && response.statusCode <= 299
      await helpers.query(insertAttempt, [
        id,
        helpers.job.attempts,
        started,
        response.statusCode,
        Date.now() - started.getTime(),
        ok ? "delivered" : "retry"
      ])
      if (!ok) throw new Error(`The receiver answered ${response.statusCode}.`)
    }
  }
})
process.stdout.write("ready\n")
await runner.promise
await agent.close()
