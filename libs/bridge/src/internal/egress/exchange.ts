/**
 * One HTTP exchange over the egress Agent: send, refuse encoded responses,
 * and collect the body under the 1 MiB cap as it arrives, all under one
 * deadline. Any end other than a fully read response aborts the request,
 * which drops its connection instead of returning it to the pool.
 *
 * A request that discards the body ends with the response head instead: its
 * answer is the status and headers, whatever the body holds or however it is
 * encoded. The body is then drained unread, never decoded, until it ends
 * (the connection is reused), passes 1 MiB or the deadline (the connection
 * is dropped).
 *
 * A failure before any answer byte on a connection that had carried an
 * earlier exchange (the server closed a kept-alive connection just as it was
 * reused) is `StaleConnection`: the caller may send the request again, once,
 * on a fresh connection.
 *
 * Written on undici's `dispatch` handler API inside a single `Effect.async`:
 * no promise, no body stream and one async boundary per exchange keep egress
 * close to the cost of a raw undici request.
 */
import { Data, Effect } from "effect"
import type { IncomingHttpHeaders } from "node:http"
import type { Agent, Dispatcher } from "undici"
import { classifyFailure } from "./classifyFailure.js"
import { track, type Written } from "./connectionReuse.js"
import type { Deadlines } from "./Deadlines.js"
import {
  EgressEncodingRefused,
  type EgressError,
  EgressNetworkError,
  EgressResponseTooLarge,
  EgressTimeout,
  MAX_BODY_BYTES
} from "./EgressError.js"
import type { PreparedRequest } from "./prepareRequest.js"

/** A response read in full. */
export interface RawResponse {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: Uint8Array
}

const flattenHeaders = (headers: IncomingHttpHeaders): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const name in headers) {
    const value = headers[name]
    if (value !== undefined) out[name.toLowerCase()] = Array.isArray(value) ? value.join(", ") : value
  }
  return out
}

// The header is remote text: keep it short and printable before it reaches logs.
const printable = (text: string) => text.replace(/[^\x20-\x7e]/g, "?").slice(0, 40)

// Checks made on the headers alone, before any of the body is read.
const refuseHeaders = (host: string, headers: Record<string, string>): EgressError | undefined => {
  const encoding = headers["content-encoding"]
  if (encoding !== undefined && encoding.trim().toLowerCase() !== "identity") {
    return new EgressEncodingRefused({ host, contentEncoding: printable(encoding) })
  }
  const declared = Number(headers["content-length"])
  if (Number.isFinite(declared) && declared > MAX_BODY_BYTES) {
    return new EgressResponseTooLarge({ host, limitBytes: MAX_BODY_BYTES })
  }
  return undefined
}

const NO_BODY = new Uint8Array(0)

/** The connection broke before any answer byte, and it was a reused one: `error` is what happened. */
export class StaleConnection extends Data.TaggedError("StaleConnection")<{ readonly error: EgressError }> {}

// What a server closing a connection looks like from the client.
const CONNECTION_LOST = new Set(["UND_ERR_SOCKET", "ECONNRESET", "EPIPE"])

const connectionLost = (error: EgressError): boolean =>
  error._tag === "EgressNetworkError" && error.code !== undefined && CONNECTION_LOST.has(error.code)

/** Sends `request` and reads the whole response (or only its head); no redirect is followed. */
export const exchange = (
  agent: Agent,
  request: PreparedRequest,
  deadlines: Deadlines,
  timeoutMs: number
): Effect.Effect<RawResponse, EgressError | StaleConnection> =>
  Effect.async<RawResponse, EgressError | StaleConnection>((resume) => {
    const { discardBody, host } = request
    let settled = false
    let controller: Dispatcher.DispatchController | undefined
    let status = 0
    let headers: Record<string, string> = {}
    const chunks: Array<Buffer> = []
    let size = 0
    // Any answer byte (an informational 1xx too) means the server may have acted on the request.
    let answered = false
    const written: Written = { reused: false }

    // Settles once. A failure aborts the request: undici then destroys the socket.
    const fail = (error: EgressError | StaleConnection) => {
      if (settled) return
      settled = true
      disarm()
      controller?.abort(error)
      resume(Effect.fail(error))
    }
    // After a head-only answer settled: stop draining a body that is too long or too slow.
    const drop = (reason: string) => {
      disarm()
      controller?.abort(new EgressNetworkError({ host, kind: "protocol", reason }))
    }
    const disarm = deadlines.arm(() =>
      settled ? drop("the discarded response body ran past the deadline") : fail(new EgressTimeout({ host, timeoutMs }))
    )

    agent.dispatch(
      {
        origin: request.origin,
        path: request.path,
        method: request.method,
        headers: request.headers,
        body: request.body ?? null
      },
      {
        onRequestStart: (started) => {
          controller = started
          // Timed out or interrupted while still waiting for a connection.
          if (settled) return started.abort(new EgressNetworkError({ host, kind: "connect", reason: "the exchange was abandoned" }))
          track(written)
        },
        onResponseStart: (_, statusCode, responseHeaders) => {
          answered = true
          // 1xx informational answers are not the response.
          if (statusCode < 200 || settled) return
          status = statusCode
          headers = flattenHeaders(responseHeaders)
          if (discardBody) {
            settled = true
            return resume(Effect.succeed({ status, headers, body: NO_BODY }))
          }
          const refusal = refuseHeaders(host, headers)
          if (refusal !== undefined) fail(refusal)
        },
        onResponseData: (_, chunk) => {
          size += chunk.byteLength
          if (discardBody) {
            if (size > MAX_BODY_BYTES) drop("the discarded response body passed 1 MiB")
            return
          }
          if (settled) return
          if (size > MAX_BODY_BYTES) return fail(new EgressResponseTooLarge({ host, limitBytes: MAX_BODY_BYTES }))
          chunks.push(chunk)
        },
        onResponseEnd: () => {
          if (settled) return disarm()
          settled = true
          disarm()
          const body = chunks.length === 1 && chunks[0] !== undefined ? chunks[0] : Buffer.concat(chunks, size)
          resume(Effect.succeed({ status, headers, body }))
        },
        onResponseError: (_, error) => {
          if (settled) return disarm()
          const failure = classifyFailure(host, timeoutMs, error)
          fail(!answered && written.reused && connectionLost(failure) ? new StaleConnection({ error: failure }) : failure)
        }
      }
    )

    // Interrupted by the caller: stop waiting and drop the connection.
    return Effect.sync(() => {
      if (settled) return
      settled = true
      disarm()
      controller?.abort(new EgressNetworkError({ host, kind: "connect", reason: "the exchange was interrupted" }))
    })
  })
