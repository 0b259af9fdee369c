/**
 * The app's output fields and samples come from the contract: the committed
 * lib/contract.json is what the generator makes from `@crm-relay/contract`
 * today, and each trigger's output fields are exactly the leaf paths of the
 * contract's example delivery, which the delivery Schema accepts with no field
 * left over. (The live deliveries are held to the same fields in Zapier.test.)
 */
import { Events } from "@crm-relay/contract"
import * as Examples from "@crm-relay/contract/Examples"
import { describe, expect, it } from "@effect/vitest"
import { Schema } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { appContract, render } from "../scripts/AppContract.mjs"
import { App, leafPaths } from "./support/Zap.mjs"

const committed = Fs.readFileSync(Path.join(import.meta.dirname, "..", "lib", "contract.json"), "utf8")

// The fields the issue measured: in every live delivery, in no real preview record.
const NOT_IN_PREVIEWS = ["contact__full_name", "contact__phones", "contact__emails", "contact__address", "contact__first_name", "contact__last_name", "contact__postal_code", "event", "created_at"]

describe("output fields from the contract", () => {
  it("lib/contract.json is what `npm run generate -w @crm-relay/zapier` makes from @crm-relay/contract today", () => {
    const { contract, problems } = appContract()
    expect(problems).toEqual([])
    expect(committed).toBe(render(contract))
  })

  const cases = [
    { kind: "lead", schema: Events.LeadEvent, example: Examples.leadEvent, trigger: App.triggers.new_lead },
    { kind: "booking", schema: Events.BookingEvent, example: Examples.bookingEvent, trigger: App.triggers.new_booking }
  ] as const
  for (const { kind, schema, example, trigger } of cases) {
    it(`${kind}: every field of a delivery has a labelled output field, and every output field names a field of a delivery`, () => {
      // The example carries every field of the Schema (the optional postal code too) and nothing else.
      expect(() => Schema.decodeUnknownSync(schema as Schema.Schema<unknown>, { onExcessProperty: "error" })(example)).not.toThrow()
      const keys = trigger.operation.outputFields.map((f) => f.key).sort()
      expect(keys).toEqual(leafPaths(example).sort())
      expect(trigger.operation.outputFields.filter((f) => f.label.trim() === "")).toEqual([])
      for (const key of NOT_IN_PREVIEWS) expect(keys).toContain(key)
    })

    it(`${kind}: the sample is the contract's example delivery`, () => {
      expect(trigger.operation.sample).toEqual(example)
    })
  }
})
