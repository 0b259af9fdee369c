/**
 * Post-processing of generated OpenAPI documents.
 */

type Spec = Record<string, any>

/**
 * Every document's license: the project's own, package.json's `UNLICENSED` (none is granted), as an
 * SPDX expression (a `LicenseRef-`), since tools ask for an identifier or a URL.
 */
export const LICENSE = { name: "Proprietary", identifier: "LicenseRef-Proprietary" }

/**
 * The document's one server: `{base_url}`, as the contract names an API's address, with an
 * `example` default and a `description` of where to find it.
 */
export const baseUrlServer = (example: string, description: string) => [
  { url: "{base_url}", variables: { base_url: { default: example, description } } }
]

/**
 * Replaces every 400 response with `response`, and drops the framework's
 * decode-error schemas: our servers never answer with that format.
 */
export const replaceDecodeErrors = (response: Record<string, unknown>) => (spec: Spec): Spec => {
  for (const path of Object.values<Spec>(spec["paths"] ?? {})) {
    for (const operation of Object.values<Spec>(path)) {
      if (operation["responses"]?.["400"] !== undefined) operation["responses"]["400"] = response
    }
  }
  const schemas: Spec = spec["components"]?.["schemas"] ?? {}
  for (const name of ["HttpApiDecodeError", "Issue", "PropertyKey", "BadRequest"]) delete schemas[name]
  return spec
}

/**
 * Declares the `Retry-After` header (whole seconds) on every 429 response:
 * the rate-limit answer carries it besides `retryAfterSeconds`.
 */
export const declareRetryAfter = (spec: Spec): Spec => {
  for (const path of Object.values<Spec>(spec["paths"] ?? {})) {
    for (const operation of Object.values<Spec>(path)) {
      const response = operation["responses"]?.["429"]
      if (response === undefined) continue
      response["headers"] = {
        ...response["headers"],
        "Retry-After": {
          description: "Seconds to wait before the next request with this key.",
          required: true,
          schema: { type: "integer", minimum: 1 }
        }
      }
    }
  }
  return spec
}

/**
 * A copy of `spec` with wire examples: `[request, success]` bodies by
 * operationId, and schema-level examples by component name.
 */
export const withExamples = <T extends object>(
  spec: T,
  operations: Record<string, readonly [unknown, unknown]>,
  components: Record<string, unknown>
): T => {
  const copy: Spec = structuredClone(spec)
  for (const path of Object.values<Spec>(copy["paths"] ?? {})) {
    for (const operation of Object.values<Spec>(path)) {
      const [request, success] = operations[operation["operationId"]] ?? [undefined, undefined]
      const requestMedia = operation["requestBody"]?.["content"]?.["application/json"]
      if (request !== undefined && requestMedia !== undefined) requestMedia["example"] = request
      for (const [status, response] of Object.entries<Spec>(operation["responses"] ?? {})) {
        const media = response["content"]?.["application/json"]
        if (success !== undefined && status.startsWith("2") && media !== undefined) media["example"] = success
      }
    }
  }
  const schemas: Spec = copy["components"]?.["schemas"] ?? {}
  for (const [name, example] of Object.entries(components)) {
    if (schemas[name] !== undefined) schemas[name]["examples"] = [example]
  }
  return copy as T
}
