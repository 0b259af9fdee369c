/**
 * A raw TLS server speaking just enough HTTP/1.1 to misbehave on purpose: it
 * answers with keep-alive, and per request decides to answer, to close the
 * connection without writing a byte (a kept-alive connection closed just as
 * the client reuses it), or to close it halfway through an answer.
 */
import { Effect } from "effect"
import type * as net from "node:net"
import * as tls from "node:tls"
import { material } from "./egressServers.js"

/** One request as the server read it. */
export interface RawRequest {
  /** 1 for the first connection accepted, 2 for the next... */
  readonly connection: number
  /** 1 for the first request on its connection, 2 for the next... */
  readonly nth: number
  readonly requestLine: string
  /** Header names lower-case. */
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
}

/** What the server does with a request. */
export type Treatment = "answer" | "close" | "close_mid_answer"

const ANSWER = "{\"ok\":true}"
const answer = `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${ANSWER.length}\r\n` +
  `connection: keep-alive\r\nkeep-alive: timeout=60\r\n\r\n${ANSWER}`
const halfAnswer = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"ok\":"

const parse = (head: string) => {
  const [requestLine = "", ...lines] = head.split("\r\n")
  const headers: Record<string, string> = {}
  for (const line of lines) {
    const colon = line.indexOf(":")
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim()
  }
  return { requestLine, headers }
}

/** The server on 127.0.0.1 with the test certificate, its port and every request it read. */
export const keepAliveServer = (treat: (request: RawRequest) => Treatment) =>
  Effect.acquireRelease(
    Effect.async<{ readonly server: tls.Server; readonly port: number; readonly requests: Array<RawRequest>; readonly open: Set<net.Socket> }>(
      (resume) => {
        const requests: Array<RawRequest> = []
        const open = new Set<net.Socket>()
        let connections = 0
        const server = tls.createServer({ cert: material.cert, key: material.key }, (socket) => {
          const connection = ++connections
          let nth = 0
          let buffered = Buffer.alloc(0)
          open.add(socket)
          socket.on("close", () => open.delete(socket))
          socket.on("error", () => undefined)
          socket.on("data", (chunk: Buffer) => {
            buffered = Buffer.concat([buffered, chunk])
            for (;;) {
              const end = buffered.indexOf("\r\n\r\n")
              if (end === -1) return
              const { headers, requestLine } = parse(buffered.subarray(0, end).toString("latin1"))
              const length = Number(headers["content-length"] ?? "0")
              if (buffered.length < end + 4 + length) return
              const body = buffered.subarray(end + 4, end + 4 + length).toString("utf8")
              buffered = buffered.subarray(end + 4 + length)
              const request: RawRequest = { connection, nth: ++nth, requestLine, headers, body }
              requests.push(request)
              const treatment = treat(request)
              if (treatment === "answer") socket.write(answer)
              else if (treatment === "close") return void socket.destroy()
              else return void socket.end(halfAnswer, () => socket.destroy())
            }
          })
        })
        server.listen(0, "127.0.0.1", () => {
          const address = server.address()
          resume(Effect.succeed({ server, port: typeof address === "object" && address !== null ? address.port : 0, requests, open }))
        })
      }
    ),
    ({ open, server }) =>
      Effect.async<void>((resume) => {
        for (const socket of open) socket.destroy()
        server.close(() => resume(Effect.void))
      })
  ).pipe(Effect.map(({ port, requests }) => ({ port, requests })))
