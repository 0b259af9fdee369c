import { describe, expect, it } from "@effect/vitest"
import { HttpApi } from "@effect/platform"
import { Validator } from "@seriousme/openapi-schema-validator"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { BridgeApi } from "../src/BridgeApi.js"
import { EventApi } from "../src/EventApi.js"
import { DOCUMENTS, render } from "../src/OpenApiDocuments.js"
import { REST_PATHS } from "../src/Operations.js"

const committed = (file: string) => readFileSync(join(import.meta.dirname, "..", "openapi", file), "utf8")

const endpointsOf = (api: HttpApi.HttpApi.Any) => {
  const pairs: Array<string> = []
  HttpApi.reflect(api as HttpApi.HttpApi.AnyWithProps, {
    onGroup() {},
    onEndpoint({ endpoint }) {
      pairs.push(`${endpoint.method} ${endpoint.path}`)
    }
  })
  return pairs.sort()
}

describe("OpenAPI 3.1 documents", () => {
  for (const [file, make] of Object.entries(DOCUMENTS)) {
    it(`${file} is up to date with the Schemas (run \`npm run openapi\` when this fails)`, () => {
      expect(committed(file)).toBe(render(make()))
    })

    it(`${file} is a valid OpenAPI 3.1 document`, async () => {
      const result = await new Validator().validate(JSON.parse(committed(file)))
      expect(result.errors ?? []).toEqual([])
      expect(result.valid).toBe(true)
      expect(JSON.parse(committed(file)).openapi).toMatch(/^3\.1\./)
    })
  }

  it("Event API: exactly POST /subscribe, DELETE /subscribe/{id} and GET /perform-list", () => {
    expect(endpointsOf(EventApi)).toEqual(["DELETE /subscribe/:id", "GET /perform-list", "POST /subscribe"])
  })

  it("Errors 429: \"response has Retry-After header in seconds\" — every 429 of event-api.openapi.json declares Retry-After", () => {
    const spec = JSON.parse(committed("event-api.openapi.json")) as {
      paths: Record<string, Record<string, { responses: Record<string, { headers?: Record<string, { schema: unknown }> }> }>>
    }
    const operations = Object.values(spec.paths).flatMap((path) => Object.values(path))
    expect(operations).toHaveLength(3)
    for (const operation of operations) {
      expect(operation.responses["429"]?.headers?.["Retry-After"]?.schema).toEqual({ type: "integer", minimum: 1 })
    }
  })

  it("Event API webhooks: the lead and booking deliveries, each a POST with the webhook-id, webhook-timestamp and webhook-signature headers, the event's schema as body, and what 2xx, 410, 429 and other answers do", () => {
    const spec = JSON.parse(committed("event-api.openapi.json"))
    expect(Object.keys(spec.webhooks)).toEqual(["lead", "booking"])
    for (const [kind, schema] of [["lead", "LeadEvent"], ["booking", "BookingEvent"]] as const) {
      const post = spec.webhooks[kind].post
      expect(post.parameters.map((p: { name: string; in: string; required: boolean }) => [p.name, p.in, p.required])).toEqual([
        ["webhook-id", "header", true],
        ["webhook-timestamp", "header", true],
        ["webhook-signature", "header", true]
      ])
      expect(post.requestBody.content["application/json"].schema).toEqual({ $ref: `#/components/schemas/${schema}` })
      expect(Object.keys(post.responses).sort()).toEqual(["2XX", "410", "429", "default"])
      expect(post.responses["default"].description).toContain("webhook-delivery: abort-message")
    }
    expect(spec.components.schemas.BookingEvent.properties.appointment).toEqual({ $ref: "#/components/schemas/EventAppointment" })
    // The paths stay the three pairs: deliveries are not endpoints of the service.
    expect(Object.keys(spec.paths).sort()).toEqual(["/perform-list", "/subscribe", "/subscribe/{id}"])
  })

  it("bridge contract: all six operations are HTTPS POST to their paths", () => {
    expect(endpointsOf(BridgeApi)).toEqual(Object.values(REST_PATHS).map((path) => `POST ${path}`).sort())
  })

  it("the bridge and Event API documents declare Bearer security and carry titles and descriptions", () => {
    for (const make of [DOCUMENTS["crm-bridge.openapi.json"], DOCUMENTS["event-api.openapi.json"]]) {
      const spec = make() as unknown as {
        info: { title: string; description: string }
        components: { securitySchemes: Record<string, { type: string; scheme: string }> }
      }
      expect(spec.info.title.length).toBeGreaterThan(0)
      expect(spec.info.description.length).toBeGreaterThan(0)
      expect(Object.values(spec.components.securitySchemes)).toEqual([
        expect.objectContaining({ type: "http", scheme: "bearer" })
      ])
    }
  })

  it("the Integrations area's document declares the session cookie on every operation, and no operation without it", () => {
    const spec = DOCUMENTS["portal-api.openapi.json"]() as unknown as {
      info: { title: string; description: string }
      paths: Record<string, Record<string, { security?: ReadonlyArray<Record<string, unknown>> }>>
      components: { securitySchemes: Record<string, { type: string; in: string; name: string }> }
    }
    expect(spec.info.description.length).toBeGreaterThan(0)
    expect(Object.values(spec.components.securitySchemes)).toEqual([
      expect.objectContaining({ type: "apiKey", in: "cookie", name: "crm_relay_portal" })
    ])
    const operations = Object.values(spec.paths).flatMap((path) => Object.values(path))
    expect(operations.length).toBeGreaterThan(10)
    for (const operation of operations) expect(operation.security?.length).toBe(1)
  })
})
