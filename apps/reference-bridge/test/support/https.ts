/**
 * A plain node:https client for the tests: real TLS against the bridge's
 * CA, no redirects followed, no decompression, raw bodies kept.
 */
import { Data, Effect } from "effect"
import * as https from "node:https"

/** What came back. */
export interface Answer {
  readonly status: number
  readonly headers: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
  readonly raw: Buffer
  readonly text: string
  /** The body parsed as JSON, or undefined when it is not JSON. */
  readonly json: unknown
}

/** The exchange failed below HTTP (reset socket, TLS failure). */
export class ExchangeFailed extends Data.TaggedError("ExchangeFailed")<{ readonly cause: unknown }> {}

/** An agent trusting `ca`, with keep-alive like a real client. */
export const agent = (ca: string): https.Agent => new https.Agent({ ca, keepAlive: true })

/** One HTTPS request. */
export const send = (
  agentOrCa: https.Agent,
  method: string,
  url: string,
  options: { readonly headers?: Record<string, string>; readonly body?: string | Buffer } = {}
): Effect.Effect<Answer, ExchangeFailed> =>
  Effect.async<Answer, ExchangeFailed>((resume) => {
    const req = https.request(url, { method, agent: agentOrCa, headers: options.headers }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (chunk: Buffer) => chunks.push(chunk))
      res.on("error", (cause) => resume(Effect.fail(new ExchangeFailed({ cause }))))
      res.on("end", () => {
        const raw = Buffer.concat(chunks)
        const text = raw.toString("utf8")
        let json: unknown = undefined
        try {
          json = JSON.parse(text)
        } catch {
          json = undefined
        }
        resume(Effect.succeed({ status: res.statusCode ?? 0, headers: res.headers, raw, text, json }))
      })
    })
    req.on("error", (cause) => resume(Effect.fail(new ExchangeFailed({ cause }))))
    if (options.body !== undefined) req.write(options.body)
    req.end()
    return Effect.sync(() => req.destroy())
  })

/** POST a JSON body. */
export const postJson = (
  agentOrCa: https.Agent,
  url: string,
  body: unknown,
  headers: Record<string, string> = {}
): Effect.Effect<Answer, ExchangeFailed> =>
  send(agentOrCa, "POST", url, {
    headers: { "content-type": "application/json", accept: "application/json", ...headers },
    body: JSON.stringify(body)
  })
