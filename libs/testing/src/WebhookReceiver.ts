/**
 * A webhook receiver (the demo's and the Zapier app's tests): HTTPS on 127.0.0.1, verifying every
 * delivery's Standard Webhooks signature with the account's signing secret
 * before answering 200 (401 otherwise), as a real receiver should.
 */
import { Effect, Either } from "effect"
import * as Https from "node:https"
import type { AddressInfo } from "node:net"
import { Webhook } from "standardwebhooks"

/** One delivery as received, and whether its signature verified. */
export interface Delivery {
  readonly headers: Record<string, string>
  readonly body: string
  readonly verified: boolean
  readonly problem: string
}

/** A running receiver. */
export interface Receiver {
  readonly url: string
  /** Sets the signing secret deliveries are verified with. */
  readonly trust: (secret: string) => void
  readonly deliveries: () => ReadonlyArray<Delivery>
}

const headersOf = (raw: NodeJS.Dict<string | Array<string>>): Record<string, string> =>
  Object.fromEntries(Object.entries(raw).flatMap(([name, value]) => (value === undefined ? [] : [[name, Array.isArray(value) ? value.join(", ") : value]])))

// Why the signature does not verify, or "" when it does.
const verifyProblem = (webhook: Webhook, body: string, headers: Record<string, string>): string =>
  Either.match(Either.try(() => webhook.verify(body, headers)), {
    onLeft: (error) => (error instanceof Error ? error.message : String(error)),
    onRight: () => ""
  })

/** Starts the receiver with `tls` (certificate and key) for the scope. */
export const startReceiver = (tls: { readonly cert: string; readonly key: string }) =>
  Effect.acquireRelease(
    Effect.async<{ server: Https.Server; receiver: Receiver }, Error>((resume) => {
      const deliveries: Array<Delivery> = []
      let webhook: Webhook | undefined
      const server = Https.createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
        const chunks: Array<Buffer> = []
        req.on("data", (chunk: Buffer) => chunks.push(chunk))
        req.on("end", () => {
          const body = Buffer.concat(chunks).toString("utf8")
          const headers = headersOf(req.headers)
          const problem = webhook === undefined ? "no signing secret yet" : verifyProblem(webhook, body, headers)
          deliveries.push({ headers, body, verified: problem === "", problem })
          res.writeHead(problem === "" ? 200 : 401).end()
        })
      })
      server.once("error", (error) => resume(Effect.fail(error)))
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as AddressInfo
        resume(Effect.succeed({
          server,
          receiver: {
            url: `https://127.0.0.1:${port}/hooks/demo`,
            trust: (secret) => (webhook = new Webhook(secret)),
            deliveries: () => deliveries
          }
        }))
      })
    }),
    ({ server }) =>
      Effect.async<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  ).pipe(Effect.map(({ receiver }) => receiver))
