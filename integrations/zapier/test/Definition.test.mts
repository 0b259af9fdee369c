/**
 * The app definition as Zapier reads it: `zapier validate`'s local check (the
 * same `validate` command of zapier-platform-core, which runs
 * zapier-platform-schema), the schema run directly on the serialized
 * definition, and Zapier's output checks raising under test.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import zapier from "zapier-platform-core"
import { validateAppDefinition } from "zapier-platform-schema"
import { App, zap } from "./support/Zap.mjs"

type Handler = (event: Record<string, unknown>) => Promise<{ results: unknown }>
const handler = (app: object): Handler => (zapier as unknown as { createAppHandler: (app: object) => Handler }).createAppHandler(app)

describe("the app definition", () => {
  it.effect("validates: `zapier validate`'s local routine and zapier-platform-schema find no error", () =>
    Effect.gen(function*() {
      const validated = yield* Effect.promise(() => handler(App)({ command: "validate" }))
      expect(validated.results).toEqual([])
      const definition = (yield* Effect.promise(() => handler(App)({ command: "definition" }))).results
      expect(validateAppDefinition(definition).errors.map((e: { stack: string }) => e.stack)).toEqual([])
    }))

  it.effect("declares custom auth (base URL + key), a connection label, and the two hook triggers with labelled output fields and a sample", () =>
    Effect.gen(function*() {
      const definition = (yield* Effect.promise(() => handler(App)({ command: "definition" }))).results as {
        authentication: { type: string; fields: Array<{ key: string; type: string }> }
        triggers: Record<string, { operation: { type: string; outputFields: Array<{ key: string; label?: string }>; sample: unknown } }>
      }
      expect(definition.authentication.type).toBe("custom")
      expect(definition.authentication.fields.map((f) => [f.key, f.type])).toEqual([["base_url", "string"], ["api_key", "password"]])
      expect(Object.keys(definition.triggers).sort()).toEqual(["new_booking", "new_lead"])
      for (const trigger of Object.values(definition.triggers)) {
        expect(trigger.operation.type).toBe("hook")
        expect(trigger.operation.outputFields.filter((f) => !f.label)).toEqual([])
        expect(trigger.operation.sample).toBeTypeOf("object")
      }
    }))

  it.effect("output checks are on, as under `zapier test`: a trigger's perform answering an object instead of a list fails with Zapier's CheckError", () =>
    Effect.gen(function*() {
      const broken = {
        ...App,
        triggers: {
          ...App.triggers,
          new_lead: { ...App.triggers.new_lead, operation: { ...App.triggers.new_lead.operation, perform: () => ({ id: "x" }) } }
        }
      }
      const tester = zapier.createAppTester(broken)
      const error = yield* Effect.flip(Effect.tryPromise(() => tester(broken.triggers.new_lead.operation.perform, { cleanedRequest: { id: "x" } })))
      expect(String(error.cause)).toContain("Invalid API Response")
      // The real trigger's perform passes the same checks.
      const event = { id: "a", event: "lead" }
      expect(yield* zap(App.triggers.new_lead.operation.perform, { cleanedRequest: event })).toEqual([event])
    }))
})
