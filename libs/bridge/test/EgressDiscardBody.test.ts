/**
 * `responseBody: "discard"`: a caller that needs only the status (a webhook
 * receiver's answer) gets the response head, whatever the body's size or
 * encoding; the body is drained unread and bounded. Bridge exchanges keep the
 * strict rules ("responses are uncompressed JSON", 1 MiB).
 */
import { Eventually } from "@crm-relay/testing"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { gzipSync } from "node:zlib"
import { Egress, MAX_BODY_BYTES } from "../src/Egress.js"
import { httpsServer, LOOPBACK_DNS, testEgress } from "./support/egressServers.js"

const egressLayer = testEgress(LOOPBACK_DNS, { allowPrivate: ["127.0.0.1/32"] })

const send = (url: string, responseBody: "read" | "discard") =>
  Effect.flatMap(Egress, (egress) => egress.send({ method: "POST", url, body: "{}", options: { responseBody } }))

/**
 * 2xx answers a bridge exchange refuses: a gzip body (8 MiB once inflated),
 * a body that streams until the client goes away, and one declaring 2 MiB.
 */
const awkwardReceiver = (endless: { written: number; closed: boolean }) =>
  httpsServer((request, res) => {
    if (request.url === "/gzip") {
      res.writeHead(200, { "content-type": "application/json", "content-encoding": "gzip" })
      res.end(gzipSync(Buffer.alloc(8 * MAX_BODY_BYTES, 0x20)))
    } else if (request.url === "/endless") {
      res.writeHead(202, { "content-type": "application/json" })
      const chunk = Buffer.alloc(64 * 1024, 0x20)
      res.on("close", () => {
        endless.closed = true
      })
      const pump = () => {
        while (!res.destroyed) {
          endless.written += chunk.length
          if (!res.write(chunk)) return void res.once("drain", pump)
        }
      }
      pump()
    } else {
      res.writeHead(200, { "content-length": String(2 * MAX_BODY_BYTES) })
      res.write(Buffer.alloc(1024, 0x20))
    }
  })

describe("Egress: a response whose body is discarded", () => {
  it.live("a 2xx is answered whatever its body: encoded (never decompressed), streaming past 1 MiB (not read past the bound), or declaring over 1 MiB", () =>
    Effect.gen(function*() {
      const endless = { written: 0, closed: false }
      const server = yield* awkwardReceiver(endless)
      const base = `https://receiver.test:${server.port}`
      const gzip = yield* send(`${base}/gzip`, "discard")
      expect([gzip.status, gzip.headers["content-encoding"], gzip.body.byteLength]).toEqual([200, "gzip", 0])
      const streaming = yield* send(`${base}/endless`, "discard")
      expect([streaming.status, streaming.body.byteLength]).toEqual([202, 0])
      const declared = yield* send(`${base}/declared`, "discard")
      expect([declared.status, declared.body.byteLength]).toEqual([200, 0])
      // The endless body was drained up to the bound, then its connection dropped.
      yield* Eventually.eventually(Effect.sync(() => endless.closed), Duration.seconds(30))
      const writtenAtClose = endless.written
      yield* Eventually.pause(100)
      expect(endless.written).toBe(writtenAtClose)
      // About 1.1 MiB on loopback; the margin is for kernel socket buffers, not for reading on.
      expect(writtenAtClose).toBeLessThan(4 * MAX_BODY_BYTES)
    }).pipe(Effect.scoped, Effect.provide(egressLayer)), 60_000)

  it.live("Transport rules: \"responses are uncompressed JSON\" — the same answers to a bridge exchange (body read) are still refused", () =>
    Effect.gen(function*() {
      const server = yield* awkwardReceiver({ written: 0, closed: false })
      const base = `https://receiver.test:${server.port}`
      expect(yield* Effect.flip(send(`${base}/gzip`, "read"))).toMatchObject({ _tag: "EgressEncodingRefused" })
      expect(yield* Effect.flip(send(`${base}/endless`, "read"))).toMatchObject({ _tag: "EgressResponseTooLarge" })
      expect(yield* Effect.flip(send(`${base}/declared`, "read"))).toMatchObject({ _tag: "EgressResponseTooLarge" })
    }).pipe(Effect.scoped, Effect.provide(egressLayer)), 60_000)
})
