import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as https from "node:https"
import type { AddressInfo } from "node:net"
import { generateTlsMaterial } from "../src/Certificate.js"

const serve = (material: { cert: string; key: string }) =>
  Effect.acquireRelease(
    Effect.async<https.Server>((resume) => {
      const server = https.createServer({ cert: material.cert, key: material.key }, (_, res) => res.end("ok"))
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
    }),
    (server) => Effect.async<void>((resume) => {
      server.close(() => resume(Effect.void))
    })
  )

const get = (port: number, options: https.RequestOptions) =>
  Effect.async<string, Error>((resume) => {
    const req = https.request({ host: "127.0.0.1", port, path: "/", ...options }, (res) => {
      let body = ""
      res.on("data", (chunk) => (body += chunk))
      res.on("end", () => resume(Effect.succeed(body)))
    })
    req.on("error", (error) => resume(Effect.fail(error)))
    req.end()
  })

describe("Certificate", () => {
  it.live("a server certificate verifies against its CA for the loopback names", () =>
    Effect.gen(function*() {
      const material = yield* generateTlsMaterial()
      const server = yield* serve(material)
      const port = (server.address() as AddressInfo).port
      expect(yield* get(port, { ca: material.ca, servername: "localhost" })).toBe("ok")
      expect(yield* get(port, { ca: material.ca, servername: "bridge.localhost" })).toBe("ok")
    }).pipe(Effect.scoped))

  it.live("it does not verify without its CA, nor for a name it was not issued to", () =>
    Effect.gen(function*() {
      const material = yield* generateTlsMaterial()
      const server = yield* serve(material)
      const port = (server.address() as AddressInfo).port
      const untrusted = yield* Effect.flip(get(port, { servername: "localhost" }))
      expect(untrusted.message).toMatch(/self[- ]signed|unable to (get|verify)/i)
      const wrongName = yield* Effect.flip(get(port, { ca: material.ca, servername: "evil.example" }))
      expect(wrongName.message).toMatch(/altnames|does not match/i)
    }).pipe(Effect.scoped))

  it.live("two test CAs trusted together each verify their own server (every CA has its own subject)", () =>
    Effect.gen(function*() {
      const first = yield* generateTlsMaterial()
      const second = yield* generateTlsMaterial()
      const both = [first.ca, second.ca]
      for (const material of [first, second]) {
        const server = yield* serve(material)
        const port = (server.address() as AddressInfo).port
        expect(yield* get(port, { ca: both, servername: "localhost" })).toBe("ok")
      }
    }).pipe(Effect.scoped))
})
