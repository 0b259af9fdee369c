/**
 * Effect Schemas as the Standard Schema (with JSON Schema) the MCP SDK
 * takes for a tool's input and output, so the tools are described by the
 * contract's own Schemas.
 */
import type { StandardSchemaWithJSON } from "@modelcontextprotocol/server"
import { JSONSchema, Schema } from "effect"

/** Drops `additionalProperties: false`: bridges accept unknown fields (Serialization rule 3). */
const openObject = (json: object): Record<string, unknown> => {
  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(json)) {
    if (key !== "additionalProperties" || value !== false) out[key] = open(value)
  }
  return out
}

const open = (json: unknown): unknown =>
  Array.isArray(json) ? json.map(open) : typeof json === "object" && json !== null ? openObject(json) : json

/** `schema` as a Standard Schema whose JSON Schema is generated once. */
export const toolSchema = <A, I>(schema: Schema.Schema<A, I>): StandardSchemaWithJSON<I, A> => {
  const standard = Schema.standardSchemaV1(schema)["~standard"]
  const json = openObject(JSONSchema.make(schema))
  return {
    "~standard": {
      version: 1,
      vendor: standard.vendor,
      validate: standard.validate,
      jsonSchema: { input: () => json, output: () => json }
    }
  }
}
