/**
 * The nodes' fields, samples and key form come from the contract:
 * `nodes/CrmRelay/shared/contract.json` is what `npm run generate:n8n` makes
 * from `@crm-relay/contract` today, and its fields are the Zapier app's
 * `outputFields` ("the same fields the Zapier app's `outputFields` list"),
 * as n8n paths. (Live deliveries are held to the same fields in N8n.test.)
 */
import { describe, expect, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import zapier from "../../zapier/lib/contract.json" with { type: "json" }
import { nodeContract, render } from "../scripts/NodeContract.mjs"

const committed = Fs.readFileSync(Path.join(import.meta.dirname, "..", "nodes", "CrmRelay", "shared", "contract.json"), "utf8")

describe("the n8n nodes' contract document", () => {
  it("nodes/CrmRelay/shared/contract.json is what `npm run generate:n8n` makes from @crm-relay/contract today", () => {
    const { contract, problems } = nodeContract()
    expect(problems).toEqual([])
    expect(committed).toBe(render(contract))
  })

  it("each event's fields are the Zapier app's outputFields, nested keys as n8n paths; the samples and the key form are the same", () => {
    const { contract } = nodeContract()
    for (const kind of ["lead", "booking"] as const) {
      expect(contract[kind].fields.map((f) => f.path.split(".").join("__"))).toEqual(zapier[kind].outputFields.map((f) => f.key))
      expect(contract[kind].sample).toEqual(zapier[kind].sample)
    }
    expect(contract.key).toEqual(zapier.key)
    expect(contract.unauthorized).toBe("The key is not valid; correct or rotate it.")
  })
})
