/**
 * Standard Webhooks signing checked against the reference implementation
 * (the `standardwebhooks` package).
 */
import { describe, expect, it } from "@effect/vitest"
import { Either, Redacted } from "effect"
import { randomBytes } from "node:crypto"
import { Webhook } from "standardwebhooks"
import * as WebhookSigner from "../src/WebhookSigner.js"

const newSecret = () => `whsec_${randomBytes(32).toString("base64")}`
const keyOf = (secret: string) => Either.getOrThrow(WebhookSigner.signingKey(Redacted.make(secret)))

describe("WebhookSigner", () => {
  const secret = newSecret()
  const body = JSON.stringify({ id: "d-1", event: "lead", contact: { full_name: "Zoë Ünal" } })
  const timestamp = Math.floor(Date.now() / 1000)
  const headers = WebhookSigner.headers({ key: keyOf(secret), id: "d-1", timestamp, body })

  it("Standard Webhooks: the signature is v1,base64(HMAC-SHA256(id.timestamp.body)) — identical to the reference implementation's", () => {
    expect(headers["webhook-signature"]).toBe(new Webhook(secret).sign("d-1", new Date(timestamp * 1000), body))
    expect(headers).toMatchObject({
      "content-type": "application/json",
      "user-agent": WebhookSigner.USER_AGENT,
      "webhook-id": "d-1",
      "webhook-timestamp": String(timestamp)
    })
  })

  it("Standard Webhooks: the signature verifies with the account's secret and fails with a wrong secret or a changed body", () => {
    expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body))
    expect(() => new Webhook(newSecret()).verify(body, headers)).toThrow()
    expect(() => new Webhook(secret).verify(body.replace("lead", "booking"), headers)).toThrow()
    expect(() => new Webhook(secret).verify(body, { ...headers, "webhook-id": "d-2" })).toThrow()
  })

  it("A secret that is not whsec_ + base64 is refused", () => {
    for (const bad of ["", "whsec_", "sk_abc", "whsec_not base64!"]) {
      expect(Either.isLeft(WebhookSigner.signingKey(Redacted.make(bad)))).toBe(true)
    }
  })
})
