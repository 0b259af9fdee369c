/**
 * The one place the client touches the network: a POST through the safe
 * egress service, with its failures mapped into the bridge error union and
 * diagnosed (which failure, and the next step): refused, too large or wrongly
 * encoded → Permanent; timeout or network failure → Transient.
 */
import type { Redacted } from "effect"
import { Effect } from "effect"
import type { Operations } from "@crm-relay/contract"
import type { BridgeError } from "../BridgeError.js"
import { Permanent, transient } from "../BridgeError.js"
import type { Egress, EgressError } from "../Egress.js"
import type { Answer } from "./answers.js"
import { diagnose, targetOf } from "./diagnose.js"

/** A POST to `url` with these (lower-case) headers and body bytes. */
export interface Post {
  readonly url: string
  readonly headers: Readonly<Record<string, string | Redacted.Redacted<string>>>
  readonly body: Uint8Array
  /** What the exchange is for, in egress logs: "bridge" or "oauth_token". */
  readonly purpose: "bridge" | "oauth_token"
}

/** Sends `post` through `egress` on behalf of `operation`; `peer` names the other side in messages. */
export const send = (
  egress: Egress["Type"],
  operation: Operations.OperationName,
  post: Post,
  peer: string
): Effect.Effect<Answer, BridgeError> =>
  egress.send({
    method: "POST",
    url: post.url,
    headers: post.headers,
    body: post.body,
    options: { purpose: post.purpose }
  }).pipe(
    Effect.mapError((error: EgressError): BridgeError => {
      const { diagnosis, message, retryable } = diagnose(error, targetOf(peer, post.url))
      return retryable
        ? transient({ operation, status: null, message, diagnosis })
        : new Permanent({
          operation,
          status: null,
          kind: error._tag === "EgressEncodingRefused" ? "encoding" : "egress_refused",
          message,
          diagnosis
        })
    })
  )
