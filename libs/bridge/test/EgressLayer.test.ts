import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Duration, Effect, Exit, Layer, Logger, Scope } from "effect"
import { execFile } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { DnsResolver } from "../src/DnsResolver.js"
import { DEFAULT_DEADLINE, Egress } from "../src/Egress.js"
import { eventually } from "./support/egressAssertions.js"
import { httpsServer, LOOPBACK_DNS, material, ok, testEgress } from "./support/egressServers.js"

const captureLogs = () => {
  const lines: Array<{ readonly level: string; readonly message: string }> = []
  const logger = Logger.make(({ logLevel, message }) => {
    lines.push({ level: logLevel.label, message: (Array.isArray(message) ? message : [message]).join(" ") })
  })
  return { lines, layer: Logger.replace(Logger.defaultLogger, logger) }
}

const fromEnv = (env: Record<string, string>) => Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))

const configured = (env: Record<string, string>, logs: Layer.Layer<never>) =>
  Egress.layer.pipe(
    Layer.provide(DnsResolver.layerStatic(LOOPBACK_DNS)),
    Layer.provide(fromEnv(env)),
    Layer.provide(logs)
  )

const sendTo = (url: string) => Effect.flatMap(Egress, (egress) => egress.send({ method: "POST", url, body: "{}" }))

describe("Egress Layer", () => {
  it.live("EGRESS_ALLOW_PRIVATE (read through Config) opens the listed CIDRs and is logged as a warning naming them", () =>
    Effect.gen(function*() {
      const server = yield* httpsServer(ok)
      const logs = captureLogs()
      // Egress.layer trusts only Node's store (this process has no NODE_EXTRA_CA_CERTS), so getting as
      // far as a TLS verdict proves the address policy let the connection through.
      const error = yield* Effect.flip(sendTo(`https://bridge.test:${server.port}/`)).pipe(
        Effect.provide(configured({ EGRESS_ALLOW_PRIVATE: "127.0.0.1/32,::1/128" }, logs.layer))
      )
      expect(error).toMatchObject({ _tag: "EgressNetworkError", kind: "tls" })
      expect(server.connections()).toBe(1)
      const warnings = logs.lines.filter((line) => line.level === "WARN")
      expect(warnings).toHaveLength(1)
      expect(warnings[0]?.message).toContain("127.0.0.1/32, ::1/128")
      expect(warnings[0]?.message).toContain("EGRESS_ALLOW_PRIVATE")
    }).pipe(Effect.scoped))

  it.live("without EGRESS_ALLOW_PRIVATE loopback is refused and nothing is logged at start", () =>
    Effect.gen(function*() {
      const server = yield* httpsServer(ok)
      const logs = captureLogs()
      const error = yield* Effect.flip(sendTo(`https://bridge.test:${server.port}/`)).pipe(
        Effect.provide(configured({}, logs.layer))
      )
      expect(error).toMatchObject({ _tag: "EgressRefused", reason: "private_address", address: "127.0.0.1" })
      expect(server.connections()).toBe(0)
      // The refusal itself is logged as a warning, but no start-up warning.
      expect(logs.lines.filter((line) => line.message.includes("EGRESS_ALLOW_PRIVATE"))).toHaveLength(0)
    }).pipe(Effect.scoped))

  it.effect("an EGRESS_ALLOW_PRIVATE entry that is not a CIDR fails the Layer with a ConfigError naming it", () =>
    Effect.gen(function*() {
      const logs = captureLogs()
      const error = yield* Effect.flip(Layer.build(configured({ EGRESS_ALLOW_PRIVATE: "127.0.0.1/32,10.0.0.0/33" }, logs.layer)))
      expect(error._op).toBe("InvalidData")
      expect(String(error)).toContain("EGRESS_ALLOW_PRIVATE: \"10.0.0.0/33\" is not an IP address or CIDR block")
    }).pipe(Effect.scoped))

  it("the default deadline is the contract's 10 seconds", () => {
    expect(Duration.toMillis(DEFAULT_DEADLINE)).toBe(10_000)
  })

  it.live("closing the Layer's scope closes the Agent and its pooled connections", () =>
    Effect.gen(function*() {
      const server = yield* httpsServer(ok)
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(testEgress(LOOPBACK_DNS, { allowPrivate: ["127.0.0.1/32"] }), scope)
      const response = yield* sendTo(`https://bridge.test:${server.port}/`).pipe(Effect.provide(context))
      expect(response.status).toBe(200)
      // Keep-alive: the connection stays open after the exchange...
      expect(server.openConnections()).toBe(1)
      yield* Scope.close(scope, Exit.void)
      // ...until the Layer goes away.
      expect(yield* eventually(() => server.openConnections() === 0)).toBe(true)
      const after = yield* Effect.exit(sendTo(`https://bridge.test:${server.port}/`).pipe(Effect.provide(context)))
      expect(Exit.isFailure(after)).toBe(true)
    }).pipe(Effect.scoped))

  it.live("a child process trusts the loopback CA through NODE_EXTRA_CA_CERTS and reaches localhost with EGRESS_ALLOW_PRIVATE", () =>
    Effect.gen(function*() {
      const server = yield* httpsServer(ok)
      const dir = yield* Effect.acquireRelease(
        Effect.sync(() => mkdtempSync(join(tmpdir(), "egress-"))),
        (path) => Effect.sync(() => rmSync(path, { recursive: true, force: true }))
      )
      const caFile = join(dir, "ca.pem")
      writeFileSync(caFile, material.ca)
      const child = fileURLToPath(new URL("./support/egressChild.ts", import.meta.url))
      const run = (env: Record<string, string>) =>
        Effect.async<string, Error>((resume) => {
          execFile(
            process.execPath,
            ["--import", "tsx", child, `https://localhost:${server.port}/capabilities`],
            // A bound against a hang: the child loads tsx, seconds on a quiet machine, many times that on a loaded one.
            { env: { PATH: process.env.PATH ?? "", ...env }, timeout: 600_000 },
            // The outcome is the last line; the start-up warning may come before it.
            (error, stdout) =>
              resume(error === null ? Effect.succeed(stdout.trim().split("\n").at(-1) ?? "") : Effect.fail(error))
          )
        })
      const outcome = JSON.parse(yield* run({ EGRESS_ALLOW_PRIVATE: "127.0.0.1/32,::1/128", NODE_EXTRA_CA_CERTS: caFile }))
      expect(outcome).toEqual({ ok: true, status: 200 })
      expect(server.requests).toHaveLength(1)
    }).pipe(Effect.scoped), 1_800_000)
})
