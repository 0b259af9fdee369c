import { describe, expect, it } from "@effect/vitest"
import { Either, ParseResult, Schema } from "effect"
import { NatsConfig, NatsCredentials } from "../src/Destinations/Nats.js"
import { RabbitmqConfig } from "../src/Destinations/Rabbitmq.js"

const problem = <A, I>(schema: Schema.Schema<A, I>, input: unknown): string | undefined => {
  const decoded = Schema.decodeUnknownEither(schema)(input)
  return Either.isLeft(decoded) ? ParseResult.TreeFormatter.formatErrorSync(decoded.left) : undefined
}

const rabbit = { url: "amqps://broker.example/tenant", exchange: "crm.events", routing_key: "lead.created" }
const nats = { url: "tls://broker.example:4222", subject: "crm.leads" }

describe("Broker destination settings", () => {
  it("valid RabbitMQ and NATS settings decode", () => {
    expect(problem(RabbitmqConfig, rabbit)).toBeUndefined()
    expect(problem(RabbitmqConfig, { ...rabbit, routing_key: "" })).toBeUndefined()
    expect(problem(NatsConfig, nats)).toBeUndefined()
    expect(problem(NatsCredentials, { _tag: "UserPassword", user: "relay", password: "secret" })).toBeUndefined()
  })

  describe("Bad input: a URL of the wrong scheme, an exchange name or subject that the broker would reject → a typed error", () => {
    const rabbitRows: ReadonlyArray<[string, Record<string, unknown>, string]> = [
      ["an https URL", { url: "https://broker.example" }, "amqps://"],
      ["credentials in the URL", { url: "amqps://u:p@broker.example" }, "credentials"],
      ["an exchange with a space", { exchange: "crm events" }, "letter, a digit"],
      ["an exchange of 256 characters", { exchange: "x".repeat(256) }, "1 to 255"],
      ["an empty exchange", { exchange: "" }, "1 to 255"],
      ["a routing key over 255 bytes", { routing_key: "é".repeat(128) }, "255 bytes"]
    ]
    for (const [name, change, expected] of rabbitRows) {
      it(`RabbitMQ: ${name} is refused`, () => {
        expect(problem(RabbitmqConfig, { ...rabbit, ...change })).toContain(expected)
      })
    }
    const natsRows: ReadonlyArray<[string, Record<string, unknown>, string]> = [
      ["an amqps URL", { url: "amqps://broker.example" }, "tls://"],
      ["a URL with a path", { url: "tls://broker.example/x" }, "only a scheme"],
      ["a subject with a space", { subject: "crm leads" }, "spaces"],
      ["a subject with a wildcard", { subject: "crm.*" }, "wildcards"],
      ["a subject with a full wildcard", { subject: "crm.>" }, "wildcards"],
      ["a subject with an empty token", { subject: "crm..leads" }, "none empty"],
      ["a subject of the server's own API", { subject: "$JS.API.STREAM.DELETE.x" }, "'$'"]
    ]
    for (const [name, change, expected] of natsRows) {
      it(`NATS: ${name} is refused`, () => {
        expect(problem(NatsConfig, { ...nats, ...change })).toContain(expected)
      })
    }
  })
})
