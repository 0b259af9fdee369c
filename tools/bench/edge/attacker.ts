/**
 * One attack of `bench:edge`, in its own process (forked with an IPC
 * channel), so that its thousands of sockets and requests never delay the
 * measuring client's event loop:
 *
 *   attacker.ts slow <port> <connections>      one header byte every 5 s on each connection
 *   attacker.ts idle <port> <connections>      connections that never send a byte
 *   attacker.ts bad-keys <url> <connections> <per second, 0 = no cap>
 *
 * Sends `{ openAt15 }` (its connections still open 15 s after it began),
 * and on `{ stop: true }` ends the attack, sends `{ described }` and exits.
 */
import { randomBytes } from "node:crypto"
import * as Net from "node:net"
import { setTimeout as sleep } from "node:timers/promises"
import { Pool } from "undici"

/** An attack under way. */
interface Running {
  readonly open: () => number
  readonly describe: () => string
  readonly stop: () => Promise<void>
}

/** `count` connections to `port`, opened 100 at a time; `onOpen` runs on each once connected. */
const connections = (port: number, count: number, onOpen: (socket: Net.Socket) => void): Running => {
  const sockets: Array<Net.Socket> = []
  const started = performance.now()
  let connected = 0
  let failed = 0
  let closed = 0
  let lastClose = 0
  let longest = 0
  const openedAt = new Map<Net.Socket, number>()
  let stopped = false
  const open = (remaining: number): void => {
    if (stopped || remaining === 0) return
    const now = Math.min(100, remaining)
    let settled = 0
    for (let i = 0; i < now; i++) {
      const socket = Net.connect({ port, host: "127.0.0.1" })
      sockets.push(socket)
      let done = false
      const settle = () => {
        if (done) return
        done = true
        if (++settled === now) open(remaining - now)
      }
      // Answers are read and dropped: unread, they would hold the connection's end (and close) back.
      socket.resume()
      socket.once("connect", () => {
        connected++
        const opened = performance.now()
        openedAt.set(socket, opened)
        socket.once("close", () => {
          if (stopped) return
          openedAt.delete(socket)
          closed++
          lastClose = performance.now() - started
          longest = Math.max(longest, performance.now() - opened)
        })
        onOpen(socket)
        settle()
      })
      socket.once("error", () => {
        // An error after the connection opened (a reset) is counted as its close.
        if (socket.connecting) failed++
        settle()
      })
      socket.on("error", () => undefined)
    }
  }
  open(count)
  return {
    open: () => connected - closed,
    describe: () =>
      `${connected} connected, ${failed} failed to connect, ${closed} closed by the server (the last ${(lastClose / 1000).toFixed(1)} s after the attack began; ` +
      `the longest-lived ${(longest / 1000).toFixed(1)} s after its own connect), ` +
      `${[...openedAt.values()].filter((opened) => performance.now() - opened > 15_000).length} still open 15 s after their own connect`,
    stop: async () => {
      stopped = true
      for (const socket of sockets) socket.destroy()
    }
  }
}

/** Slowloris: a request line, then one header byte every 5 s on each connection. */
const slowHeaders = (port: number, count: number): Running => {
  const live: Array<Net.Socket> = []
  const attack = connections(port, count, (socket) => {
    socket.write("GET /perform-list HTTP/1.1\r\nHost: bench\r\nX-Slow: ")
    live.push(socket)
  })
  const drip = setInterval(() => {
    for (const socket of live) if (!socket.destroyed) socket.write("a")
  }, 5_000)
  return { ...attack, stop: () => (clearInterval(drip), attack.stop()) }
}

/** Well-formed requests with random keys of the tagged form (right shape, wrong tag) over keep-alive connections, at most `perSecond` a second (0: no cap). */
const badKeys = (url: string, count: number, perSecond: number): Running => {
  const pool = new Pool(url, { connections: count, pipelining: 1, keepAliveTimeout: 30_000 })
  const statuses = new Map<number | string, number>()
  const started = performance.now()
  let issued = 0
  let stopped = false
  const worker = async () => {
    while (!stopped) {
      if (perSecond > 0) {
        const slot = started + (issued * 1000) / perSecond
        issued++
        const wait = slot - performance.now()
        if (wait > 0) await sleep(wait)
        if (stopped) return
      }
      const status = await pool.request({
        path: "/perform-list",
        method: "GET",
        headers: { authorization: `Bearer crk_${randomBytes(48).toString("base64url")}` }
      }).then(async (answer) => {
        await answer.body.dump()
        return answer.statusCode
      }, (error: unknown) => (error instanceof Error ? error.name : "error"))
      statuses.set(status, (statuses.get(status) ?? 0) + 1)
    }
  }
  const workers = Array.from({ length: count }, worker)
  return {
    open: () => 0,
    describe: () => {
      const total = [...statuses.values()].reduce((a, b) => a + b, 0)
      const perSec = total / ((performance.now() - started) / 1000)
      return `${total} requests (${perSec.toFixed(0)}/s): ${[...statuses].map(([s, n]) => `${s}×${n}`).join(", ")}`
    },
    stop: async () => {
      stopped = true
      await Promise.all(workers)
      await pool.destroy()
    }
  }
}

const [kind, target = "", count = "0", rate = "0"] = process.argv.slice(2)
const running = kind === "slow"
  ? slowHeaders(Number(target), Number(count))
  : kind === "idle"
  ? connections(Number(target), Number(count), () => undefined)
  : badKeys(target, Number(count), Number(rate))
setTimeout(() => process.send?.({ openAt15: running.open() }), 15_000)
process.on("message", (message: { readonly stop?: boolean }) => {
  if (message.stop !== true) return
  const described = running.describe()
  void running.stop().then(() => process.send?.({ described }, () => process.exit(0)))
})
