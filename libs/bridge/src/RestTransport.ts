/**
 * The REST transport: an HTTPS POST of the request object to
 * `{bridge_base_url}` + the operation's path; the answer body is the receipt.
 */
import { Effect, Layer, Redacted } from "effect"
import { Operations } from "@crm-relay/contract"
import { BridgeTransport } from "./BridgeTransport.js"
import { Egress } from "./Egress.js"
import type { InvalidConnection } from "./InvalidConnection.js"
import type { TransportEntry } from "./TransportRegistry.js"
import { jsonAnswer } from "./internal/answers.js"
import { bearerHeader } from "./internal/bearerHeader.js"
import { send } from "./internal/send.js"
import { checkEndpointUrl } from "./internal/urls.js"

/** The registry kind of this transport. */
export const kind = "rest"

const encoder = new TextEncoder()

/** The REST transport toward `baseUrl` ({bridge_base_url}); refuses a URL that is not plain HTTPS. */
export const layer = (baseUrl: string): Layer.Layer<BridgeTransport, InvalidConnection, Egress> =>
  Layer.effect(
    BridgeTransport,
    Effect.gen(function*() {
      const base = (yield* checkEndpointUrl("url", "bridge URL", baseUrl)).href.replace(/\/+$/, "")
      const urls = Object.fromEntries(
        Operations.OPERATIONS.map((op) => [op, `${base}${Operations.REST_PATHS[op]}`])
      ) as Record<Operations.OperationName, string>
      const egress = yield* Egress
      const authorization = bearerHeader()
      return BridgeTransport.of({
        kind,
        send: (request) => {
          const headers: Record<string, string | Redacted.Redacted<string>> = {
            "content-type": "application/json",
            "accept": "application/json",
            "authorization": authorization(request.bearer)
          }
          if (request.idempotencyKey !== undefined) headers["idempotency-key"] = request.idempotencyKey
          return send(egress, request.operation, {
            url: urls[request.operation],
            headers,
            body: encoder.encode(JSON.stringify(request.body)),
            purpose: "bridge"
          }, "the bridge").pipe(
            Effect.flatMap((answer) =>
              Effect.map(jsonAnswer(request.operation, answer, "the bridge"), (receipt) => ({ status: answer.status, receipt }))
            ),
          )
        }
      })
    })
  )

/** The registry entry of the REST transport. */
export const entry: TransportEntry = { kind, layer }
