import { describe, expect, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { Egress } from "../src/Egress.js"
import { httpsServer, LOOPBACK_DNS, ok, testEgress } from "./support/egressServers.js"

const loopbackEgress = testEgress(LOOPBACK_DNS, { allowPrivate: ["127.0.0.1/32"] })

describe("Egress: the exchange", () => {
  it.live("sends the request to the pinned address and reads the whole response", () =>
    Effect.gen(function*() {
      const server = yield* httpsServer((request, res) => {
        res.writeHead(201, { "content-type": "application/json", "x-echo": request.headers["authorization"] ?? "" })
        res.end(JSON.stringify({ got: request.body.toString("utf8") }))
      })
      const egress = yield* Egress
      const response = yield* egress.send({
        method: "POST",
        url: `https://bridge.test:${server.port}/capabilities`,
        headers: { "content-type": "application/json", authorization: Redacted.make("Bearer secret-key") },
        body: "{\"tenant_id\":\"t1\"}",
        options: { purpose: "bridge" }
      })
      expect(response.status).toBe(201)
      expect(response.headers["content-type"]).toBe("application/json")
      expect(response.headers["x-echo"]).toBe("Bearer secret-key")
      expect(JSON.parse(Buffer.from(response.body).toString("utf8"))).toEqual({ got: "{\"tenant_id\":\"t1\"}" })
      expect(response.durationMs).toBeGreaterThan(0)
      expect(server.requests).toHaveLength(1)
      expect(server.requests[0]?.url).toBe("/capabilities")
      expect(server.requests[0]?.method).toBe("POST")
      // TLS verified the original host name: it was sent as SNI although the socket went to 127.0.0.1.
      expect(server.requests[0]?.servername).toBe("bridge.test")
    }).pipe(Effect.scoped, Effect.provide(loopbackEgress)))

  it.live("keeps connections alive between exchanges with the same origin", () =>
    Effect.gen(function*() {
      const server = yield* httpsServer(ok)
      const egress = yield* Egress
      for (let i = 0; i < 20; i++) {
        const response = yield* egress.send({ method: "POST", url: `https://bridge.test:${server.port}/leads`, body: "{}" })
        expect(response.status).toBe(200)
      }
      expect(server.requests).toHaveLength(20)
      // undici may open a second socket while the first is being released; never one per exchange.
      expect(server.connections()).toBeLessThanOrEqual(2)
    }).pipe(Effect.scoped, Effect.provide(loopbackEgress)))
})
