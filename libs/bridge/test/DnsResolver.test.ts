import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { DnsLookupError, DnsResolver } from "../src/DnsResolver.js"

const resolve = (host: string) => Effect.flatMap(DnsResolver, (resolver) => resolver.resolve(host))

describe("DnsResolver", () => {
  describe("layerStatic (the test resolver)", () => {
    const layer = DnsResolver.layerStatic({
      "bridge.test": ["127.0.0.1", "::1"],
      "Upper.TEST": ["127.0.0.2"],
      "rebind.test": { sequence: [["93.184.215.14"], ["127.0.0.1"]] },
      "flaky.test": { error: "EAI_AGAIN" },
      "empty.test": []
    })

    it.effect("answers every address of a host with its family, in order", () =>
      Effect.gen(function*() {
        expect(yield* resolve("bridge.test")).toEqual([
          { address: "127.0.0.1", family: 4 },
          { address: "::1", family: 6 }
        ])
        // Host names are case-insensitive, in the map and in the question.
        expect(yield* resolve("Bridge.TEST")).toHaveLength(2)
        expect(yield* resolve("upper.test")).toEqual([{ address: "127.0.0.2", family: 4 }])
      }).pipe(Effect.provide(layer)))

    it.effect("a sequence feeds rebinding: call n gets answer n, the last one repeats", () =>
      Effect.gen(function*() {
        expect((yield* resolve("rebind.test"))[0]?.address).toBe("93.184.215.14")
        expect((yield* resolve("rebind.test"))[0]?.address).toBe("127.0.0.1")
        expect((yield* resolve("rebind.test"))[0]?.address).toBe("127.0.0.1")
      }).pipe(Effect.provide(layer)))

    it.effect("an unknown host is NXDOMAIN; errors and empty answers fail with a code", () =>
      Effect.gen(function*() {
        const missing = yield* Effect.flip(resolve("missing.test"))
        expect(missing).toBeInstanceOf(DnsLookupError)
        expect(missing).toMatchObject({ host: "missing.test", code: "ENOTFOUND" })
        expect(missing.message).toBe("The host name missing.test could not be resolved (ENOTFOUND).")
        expect(yield* Effect.flip(resolve("flaky.test"))).toMatchObject({ code: "EAI_AGAIN" })
        expect(yield* Effect.flip(resolve("empty.test"))).toMatchObject({ code: "ENODATA" })
        // Names inherited from Object.prototype are not hosts.
        expect(yield* Effect.flip(resolve("constructor"))).toMatchObject({ code: "ENOTFOUND" })
      }).pipe(Effect.provide(layer)))

    it.effect("each Layer instance keeps its own sequence position", () =>
      Effect.gen(function*() {
        const first = yield* resolve("rebind.test").pipe(Effect.provide(layer))
        const again = yield* resolve("rebind.test").pipe(Effect.provide(layer))
        expect(first[0]?.address).toBe("93.184.215.14")
        expect(again[0]?.address).toBe("93.184.215.14")
      }))
  })

  describe("layerSystem", () => {
    // localhost comes from the hosts file: no query leaves the machine.
    it.live("resolves localhost to loopback addresses through the operating system", () =>
      Effect.gen(function*() {
        const answers = yield* resolve("localhost")
        expect(answers.length).toBeGreaterThan(0)
        for (const answer of answers) {
          expect(["127.0.0.1", "::1"]).toContain(answer.address)
          expect(answer.family).toBe(answer.address === "::1" ? 6 : 4)
        }
      }).pipe(Effect.provide(DnsResolver.layerSystem)))
  })
})
