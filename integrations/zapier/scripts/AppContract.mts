/**
 * What the Zapier app takes from the contract, as one JSON document: for each
 * delivered event kind, the output fields (one per leaf of the delivery's
 * Schema, nested keys joined with `__` as Zapier flattens them) and the
 * sample (the contract's example delivery); and the integration key's form.
 * `npm run generate -w @crm-relay/zapier` writes it to `lib/contract.json`,
 * which the CommonJS app requires; a test regenerates it and compares.
 */
import { Events } from "@crm-relay/contract"
import * as Examples from "@crm-relay/contract/Examples"
import { KEY_PATTERN, KEY_PREFIX } from "@crm-relay/events/IntegrationKeys"
import { SchemaAST } from "effect"
import type { Schema } from "effect"

/** One Zapier output field. */
export interface OutputField {
  readonly key: string
  readonly label: string
  readonly type: "string" | "boolean" | "datetime"
  readonly list?: true
}

/** The document the app requires. */
export interface AppContract {
  readonly "//": string
  readonly key: { readonly prefix: string; readonly pattern: string }
  readonly lead: { readonly outputFields: ReadonlyArray<OutputField>; readonly sample: unknown }
  readonly booking: { readonly outputFields: ReadonlyArray<OutputField>; readonly sample: unknown }
}

/** The separator Zapier uses between the segments of a nested key. */
export const NESTED = "__"

const WORDS: Record<string, string> = { id: "ID" }
const label = (path: ReadonlyArray<string>) =>
  path
    .flatMap((segment) => segment.split("_"))
    .map((word) => WORDS[word] ?? `${word.charAt(0).toUpperCase()}${word.slice(1)}`)
    .join(" ")

const identifierOf = (ast: SchemaAST.AST) => SchemaAST.getIdentifierAnnotation(ast).pipe((o) => (o._tag === "Some" ? o.value : ""))

const scalar = (ast: SchemaAST.AST): OutputField["type"] | undefined => {
  if (identifierOf(ast) === "Instant") return "datetime"
  switch (ast._tag) {
    case "StringKeyword":
    case "TemplateLiteral":
      return "string"
    case "BooleanKeyword":
      return "boolean"
    case "Literal":
      return typeof ast.literal === "boolean" ? "boolean" : typeof ast.literal === "string" ? "string" : undefined
    case "Union": {
      const kinds = new Set(ast.types.map(scalar))
      return kinds.size === 1 ? [...kinds][0] : undefined
    }
    case "Refinement":
      return scalar(ast.from)
    default:
      return undefined
  }
}

/**
 * The output fields of a delivery Schema, in the Schema's order; `problems`
 * names any part of it this mapping does not know (the test requires none).
 */
export const outputFields = (schema: Schema.Schema.AnyNoContext) => {
  const fields: Array<OutputField> = []
  const problems: Array<string> = []
  const walk = (ast: SchemaAST.AST, path: ReadonlyArray<string>): void => {
    const type = scalar(ast)
    if (type !== undefined) {
      fields.push({ key: path.join(NESTED), label: label(path), type })
      return
    }
    if (ast._tag === "Refinement") return walk(ast.from, path)
    if (ast._tag === "TypeLiteral") {
      for (const property of ast.propertySignatures) walk(property.type, [...path, String(property.name)])
      if (ast.indexSignatures.length > 0) problems.push(`${path.join(".") || "(root)"}: index signatures have no fixed fields`)
      return
    }
    if (ast._tag === "TupleType" && ast.elements.length === 0 && ast.rest.length === 1) {
      const item = scalar(ast.rest[0]!.type)
      if (item !== undefined) {
        fields.push({ key: path.join(NESTED), label: label(path), type: item, list: true })
        return
      }
    }
    problems.push(`${path.join(".") || "(root)"}: no Zapier field for a ${ast._tag}`)
  }
  walk(schema.ast, [])
  return { fields, problems }
}

/** Builds the document from the contract; fails listing what it could not map. */
export const appContract = (): { readonly contract: AppContract; readonly problems: ReadonlyArray<string> } => {
  const lead = outputFields(Events.LeadEvent)
  const booking = outputFields(Events.BookingEvent)
  return {
    contract: {
      "//": "Generated from @crm-relay/contract by `npm run generate -w @crm-relay/zapier`; do not edit.",
      // The key is the prefix and base64url of 48 bytes (64 characters: random bytes and their tag), or of 32 random bytes for keys issued before tags (43).
      key: { prefix: KEY_PREFIX, pattern: KEY_PATTERN },
      lead: { outputFields: lead.fields, sample: Examples.leadEvent },
      booking: { outputFields: booking.fields, sample: Examples.bookingEvent }
    },
    problems: [...lead.problems.map((p) => `lead ${p}`), ...booking.problems.map((p) => `booking ${p}`)]
  }
}

/** The document as written to `lib/contract.json`. */
export const render = (contract: AppContract): string => `${JSON.stringify(contract, null, 2)}\n`
