import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as BrokerProcess from "../src/BrokerProcess.js"

describe("BrokerProcess", () => {
  it.effect("a machine without the broker fails with a sentence naming the package", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(BrokerProcess.findProgram("crm-relay-no-such-broker", "no-such-package", ["/nonexistent/*/bin/x"]))
      expect(error.message).toBe(
        "The program crm-relay-no-such-broker was not found: install the Debian package no-such-package (apt-get install no-such-package)."
      )
    }))

  it.effect("a program is found through a versioned folder", () =>
    Effect.gen(function*() {
      const path = yield* BrokerProcess.findProgram("node-does-not-matter", "nodejs", [`${process.execPath.replace(/\/[^/]+\/bin\/node$/, "/*/bin/node")}`])
      expect(path).toBe(process.execPath)
    }))
})
