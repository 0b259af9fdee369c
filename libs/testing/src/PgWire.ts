/**
 * One simple query to a PostgreSQL server on loopback, spoken in its wire
 * protocol (trust auth only): how the cluster harness asks a node itself,
 * bypassing the balancer, whether it takes writes, without a client library
 * the code under test might replace.
 */
import { Effect } from "effect"
import * as Net from "node:net"

/** What one query answered: its rows (text values, null for NULL), or the server's error. */
export type Answer =
  | { readonly _tag: "Rows"; readonly rows: ReadonlyArray<ReadonlyArray<string | null>> }
  | { readonly _tag: "Error"; readonly code: string; readonly message: string }
  | { readonly _tag: "Unreachable"; readonly message: string }

const startup = (user: string, database: string): Buffer => {
  const body = Buffer.from(`user\0${user}\0database\0${database}\0application_name\0crm-relay-test-probe\0\0`)
  const head = Buffer.alloc(8)
  head.writeInt32BE(8 + body.length, 0)
  head.writeInt32BE(196608, 4) // protocol 3.0
  return Buffer.concat([head, body])
}

const queryMessage = (sql: string): Buffer => {
  const body = Buffer.from(`${sql}\0`)
  const head = Buffer.alloc(5)
  head.write("Q", 0)
  head.writeInt32BE(4 + body.length, 1)
  return Buffer.concat([head, body])
}

// ErrorResponse fields: a type byte and a NUL-terminated string each, ended by a zero byte.
const errorFields = (body: Buffer): Record<string, string> => {
  const fields: Record<string, string> = {}
  let at = 0
  while (at < body.length && body[at] !== 0) {
    const end = body.indexOf(0, at + 1)
    fields[String.fromCharCode(body[at]!)] = body.subarray(at + 1, end).toString("utf8")
    at = end + 1
  }
  return fields
}

const dataRow = (body: Buffer): Array<string | null> => {
  const values: Array<string | null> = []
  let at = 2
  for (let i = 0; i < body.readInt16BE(0); i++) {
    const length = body.readInt32BE(at)
    at += 4
    values.push(length < 0 ? null : body.subarray(at, at + length).toString("utf8"))
    if (length > 0) at += length
  }
  return values
}

/**
 * Runs `sql` on 127.0.0.1:`port` as `user` (trust) in `database` on a new
 * connection, closed after; Unreachable when it cannot connect, asks for a
 * password, or has not answered within `timeoutMs`.
 */
export const query = (
  port: number,
  sql: string,
  options: { readonly user?: string; readonly database?: string; readonly timeoutMs?: number } = {}
): Effect.Effect<Answer> =>
  Effect.async<Answer>((resume) => {
    let buffered = Buffer.alloc(0)
    let done = false
    let queried = false
    const rows: Array<Array<string | null>> = []
    let failed: Answer | undefined
    const socket = Net.connect({ host: "127.0.0.1", port })
    const finish = (answer: Answer) => {
      if (done) return
      done = true
      clearTimeout(timer)
      socket.destroy()
      resume(Effect.succeed(answer))
    }
    const timer = setTimeout(() => finish({ _tag: "Unreachable", message: "no answer in time" }), options.timeoutMs ?? 3000)
    socket.on("connect", () => socket.write(startup(options.user ?? "postgres", options.database ?? "postgres")))
    socket.on("data", (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk])
      while (buffered.length >= 5) {
        const length = buffered.readInt32BE(1)
        if (buffered.length < 1 + length) return
        const type = String.fromCharCode(buffered[0]!)
        const body = buffered.subarray(5, 1 + length)
        buffered = buffered.subarray(1 + length)
        if (type === "R" && body.readInt32BE(0) !== 0) {
          return finish({ _tag: "Unreachable", message: "the server asked for a password (the probe speaks trust only)" })
        }
        if (type === "E") {
          const fields = errorFields(body)
          failed = { _tag: "Error", code: fields["C"] ?? "", message: fields["M"] ?? "" }
          // An error before the query (the server is starting, shutting down, or in recovery without hot standby) ends it.
          if (!queried) return finish(failed)
        }
        if (type === "D") rows.push(dataRow(body))
        if (type === "Z") {
          if (queried) return finish(failed ?? { _tag: "Rows", rows })
          queried = true
          socket.write(queryMessage(sql))
        }
      }
    })
    socket.on("error", (error) => finish({ _tag: "Unreachable", message: error.message }))
    socket.on("close", () => finish({ _tag: "Unreachable", message: "the connection closed" }))
    return Effect.sync(() => finish({ _tag: "Unreachable", message: "interrupted" }))
  })
