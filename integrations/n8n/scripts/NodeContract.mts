/**
 * What the n8n nodes take from the contract, as one JSON document the node
 * package imports (it may have no runtime dependency, so it cannot import
 * `@crm-relay/contract`): for each delivered event kind, the fields of one
 * delivery — the same leaves the Zapier app's `outputFields` list, made by the
 * same walk of the Schema, as n8n paths (`contact.full_name`) — and the
 * contract's example delivery; the integration key's form; the preview's
 * `limit` bounds and the id of its synthetic example; the contract's sentence for a refused key. `npm run generate:n8n` writes it to
 * `nodes/CrmRelay/shared/contract.json`; a test regenerates it and compares.
 */
import { Events } from "@crm-relay/contract"
import { Option, SchemaAST } from "effect"
import { appContract } from "../../zapier/scripts/AppContract.mjs"

/** One field of a delivery, as an n8n expression reaches it (`$json.contact.full_name`). */
export interface NodeField {
  readonly path: string
  readonly label: string
  readonly type: "string" | "boolean" | "datetime"
  readonly list?: true
}

/** The document the nodes import. */
export interface NodeContract {
  readonly "//": string
  readonly key: { readonly prefix: string; readonly pattern: string }
  /** The preview's `limit` bounds, and the id of the synthetic example it answers for an account without deliveries. */
  readonly preview: { readonly limitMin: number; readonly limitMax: number; readonly limitDefault: number; readonly syntheticId: string }
  /** The contract's sentence for a 401 (the key is not valid), which the credential test shows. */
  readonly unauthorized: string
  readonly lead: { readonly fields: ReadonlyArray<NodeField>; readonly sample: unknown }
  readonly booking: { readonly fields: ReadonlyArray<NodeField>; readonly sample: unknown }
}

/** Builds the document from the contract; `problems` lists what could not be mapped. */
export const nodeContract = (): { readonly contract: NodeContract; readonly problems: ReadonlyArray<string> } => {
  const { contract, problems } = appContract()
  const fields = (kind: "lead" | "booking") =>
    contract[kind].outputFields.map(({ key, ...rest }) => ({ path: key.split("__").join("."), ...rest }))
  return {
    contract: {
      "//": "Generated from @crm-relay/contract by `npm run generate:n8n`; do not edit.",
      key: contract.key,
      preview: { limitMin: Events.PERFORM_LIST_MIN, limitMax: Events.PERFORM_LIST_MAX, limitDefault: Events.PERFORM_LIST_DEFAULT, syntheticId: Events.SAMPLE_PREVIEW.id },
      unauthorized: Option.getOrThrow(SchemaAST.getDescriptionAnnotation(Events.Unauthorized.wire.ast)),
      lead: { fields: fields("lead"), sample: contract.lead.sample },
      booking: { fields: fields("booking"), sample: contract.booking.sample }
    },
    problems
  }
}

/** The document as written to `nodes/CrmRelay/shared/contract.json` (tab-indented, as the package's Prettier writes JSON). */
export const render = (contract: NodeContract): string => `${JSON.stringify(contract, null, "\t")}\n`
