/** One HTTPS (or HTTP) request from the test, trusting a given CA; the answer read completely. */
import { Effect } from "effect"
import * as Http from "node:http"
import * as Https from "node:https"

/** An answer, read completely. */
export interface Answer {
  readonly status: number
  readonly headers: Http.IncomingHttpHeaders
  readonly text: string
  readonly json: unknown
}

const parse = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

/** `method url` with `headers` and a raw or JSON `body`; dies only when no answer comes at all. */
export const request = (
  method: string,
  url: string,
  options: { readonly ca?: string; readonly headers?: Record<string, string>; readonly body?: unknown; readonly raw?: string } = {}
) =>
  Effect.async<Answer, Error>((resume) => {
    const payload = options.raw ?? (options.body === undefined ? undefined : JSON.stringify(options.body))
    const headers: Record<string, string> = { ...(options.headers ?? {}) }
    if (payload !== undefined) {
      headers["content-type"] ??= "application/json"
      headers["content-length"] = String(Buffer.byteLength(payload))
    }
    const target = new URL(url)
    const module = target.protocol === "https:" ? Https : Http
    const req = module.request(target, { method, headers, ...(options.ca === undefined ? {} : { ca: options.ca }) }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (chunk: Buffer) => chunks.push(chunk))
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8")
        resume(Effect.succeed({ status: res.statusCode ?? 0, headers: res.headers, text, json: parse(text) }))
      })
      res.on("error", (error) => resume(Effect.fail(error)))
    })
    req.on("error", (error) => resume(Effect.fail(error)))
    req.end(payload)
  })
