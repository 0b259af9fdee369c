/**
 * HTTP/1.1 over a bare TCP socket: exact bytes out (malformed, pipelined,
 * anything), every answer on the connection parsed back in order. For tests
 * and tools that try a server the way an attacker would.
 */
import * as Net from "node:net"

/** One parsed answer. */
export interface RawAnswer {
  readonly status: number
  /** Header names lower-cased; repeated headers joined with ", ". */
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
}

/** What came back on one connection. */
export interface RawExchange {
  readonly answers: ReadonlyArray<RawAnswer>
  /** The server closed the connection. */
  readonly closed: boolean
  /** Neither the expected answers nor a close came within the bound. */
  readonly timedOut: boolean
  /** Bytes after the last complete answer. */
  readonly rest: string
}

const HEAD_END = Buffer.from("\r\n\r\n")

/** Parses complete answers from `buffer`; `noBody[i]` says answer i has no body (an answer to HEAD). */
export const parseAnswers = (
  buffer: Buffer,
  noBody: ReadonlyArray<boolean> = []
): { readonly answers: Array<RawAnswer>; readonly rest: Buffer } => {
  const answers: Array<RawAnswer> = []
  let at = 0
  for (;;) {
    const headEnd = buffer.indexOf(HEAD_END, at)
    if (headEnd < 0) break
    const lines = buffer.subarray(at, headEnd).toString("latin1").split("\r\n")
    const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? "")?.[1] ?? "0")
    const headers: Record<string, string> = {}
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(":")
      if (colon < 0) continue
      const name = line.slice(0, colon).trim().toLowerCase()
      const value = line.slice(colon + 1).trim()
      headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`
    }
    let bodyStart = headEnd + 4
    let body: Buffer
    if (noBody[answers.length] === true || status === 204 || status === 304 || (status >= 100 && status < 200)) {
      body = Buffer.alloc(0)
    } else if (headers["transfer-encoding"]?.toLowerCase().includes("chunked")) {
      const chunks: Array<Buffer> = []
      let complete = false
      for (;;) {
        const lineEnd = buffer.indexOf("\r\n", bodyStart)
        if (lineEnd < 0) break
        const size = parseInt(buffer.subarray(bodyStart, lineEnd).toString("latin1"), 16)
        if (Number.isNaN(size)) break
        if (size === 0) {
          const trailerEnd = buffer.indexOf(HEAD_END, lineEnd)
          const direct = buffer.subarray(lineEnd, lineEnd + 4).equals(HEAD_END)
          if (!direct && trailerEnd < 0) break
          bodyStart = direct ? lineEnd + 4 : trailerEnd + 4
          complete = true
          break
        }
        if (buffer.length < lineEnd + 2 + size + 2) break
        chunks.push(buffer.subarray(lineEnd + 2, lineEnd + 2 + size))
        bodyStart = lineEnd + 2 + size + 2
      }
      if (!complete) break
      body = Buffer.concat(chunks)
    } else {
      const length = Number(headers["content-length"] ?? "0")
      if (buffer.length < bodyStart + length) break
      body = buffer.subarray(bodyStart, bodyStart + length)
      bodyStart += length
    }
    if (status >= 100 && status < 200) {
      at = bodyStart
      continue
    }
    answers.push({ status, headers, body: body.toString("utf8") })
    at = bodyStart
  }
  return { answers, rest: buffer.subarray(at) }
}

/**
 * Sends `data` on a new connection to `port` on loopback and collects answers until `expect`
 * of them arrived, the server closed, or `timeoutMillis` passed (a bound against a hang).
 * `noBody` marks the answers to HEAD requests.
 */
export const exchange = (
  port: number,
  data: string | Buffer | ReadonlyArray<string | Buffer>,
  options: {
    readonly expect?: number
    readonly timeoutMillis?: number
    readonly noBody?: ReadonlyArray<boolean>
    readonly host?: string
  } = {}
): Promise<RawExchange> =>
  new Promise((resolve) => {
    const socket = Net.connect({ port, host: options.host ?? "127.0.0.1" })
    const received: Array<Buffer> = []
    let finished = false
    const finish = (closed: boolean, timedOut: boolean) => {
      if (finished) return
      finished = true
      clearTimeout(timer)
      socket.destroy()
      const parsed = parseAnswers(Buffer.concat(received), options.noBody)
      resolve({ answers: parsed.answers, closed, timedOut, rest: parsed.rest.toString("latin1") })
    }
    const timer = setTimeout(() => finish(false, true), options.timeoutMillis ?? 30_000)
    socket.on("data", (chunk) => {
      received.push(chunk)
      if (options.expect !== undefined) {
        const { answers } = parseAnswers(Buffer.concat(received), options.noBody)
        if (answers.length >= options.expect) finish(false, false)
      }
    })
    socket.on("end", () => finish(true, false))
    socket.on("close", () => finish(true, false))
    socket.on("error", () => finish(true, false))
    socket.on("connect", () => {
      const parts = typeof data === "string" || Buffer.isBuffer(data) ? [data] : data
      for (const part of parts) socket.write(part)
    })
  })

/** A request in HTTP/1.1 form with CRLF line ends; `Content-Length` is added when a body is given and none is set. */
export const format = (
  method: string,
  target: string,
  headers: ReadonlyArray<readonly [string, string]>,
  body?: string | Buffer
): Buffer => {
  const bytes = body === undefined ? undefined : Buffer.isBuffer(body) ? body : Buffer.from(body, "utf8")
  const all = [...headers]
  if (bytes !== undefined && !all.some(([name]) => /^(content-length|transfer-encoding)$/i.test(name))) {
    all.push(["Content-Length", String(bytes.length)])
  }
  const head = `${method} ${target} HTTP/1.1\r\n${all.map(([n, v]) => `${n}: ${v}\r\n`).join("")}\r\n`
  return bytes === undefined ? Buffer.from(head, "latin1") : Buffer.concat([Buffer.from(head, "latin1"), bytes])
}
