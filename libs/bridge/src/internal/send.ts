/**
 * The one place the client touches the network: a POST through the safe
 * egress service, with its failures mapped into the bridge error union —
 * refused, too large or wrongly encoded → Permanent; timeout or network
 * failure → Transient.
 */
import type { Redacted } from "effect"
import { Effect } from "effect"
import type { Operations } from "@crm-relay/contract"
import type { BridgeError } from "../BridgeError.js"
import { Permanent, transient } from "../BridgeError.js"
import type { Egress } from "../Egress.js"
import type { Answer } from "./answers.js"

/** A POST to `url` with these (lower-case) headers and body bytes. */
export interface Post {
  readonly url: string
  readonly headers: Readonly<Record<string, string | Redacted.Redacted<string>>>
  readonly body: Uint8Array
  /** What the exchange is for, in egress logs: "bridge" or "oauth_token". */
  readonly purpose: "bridge" | "oauth_token"
}

const capitalize = (s: string): string => s.charAt(0).toUpperCase() + s.slice(1)

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
    Effect.catchTags({
      EgressRefused: (refusal) =>
        Effect.fail(
          new Permanent({
            operation,
            status: null,
            kind: "egress_refused",
            message: refusal.reason === "request_too_large"
              ? `The request to ${peer} exceeds the 1 MiB body limit.`
              : `Safe egress refused to reach ${peer} (${refusal.reason.replace(/_/g, " ")}).`
          })
        ),
      EgressResponseTooLarge: () =>
        Effect.fail(
          new Permanent({ operation, status: null, kind: "egress_refused", message: `The answer of ${peer} exceeded the 1 MiB limit.` })
        ),
      EgressEncodingRefused: () =>
        Effect.fail(
          new Permanent({
            operation,
            status: null,
            kind: "encoding",
            message: `${capitalize(peer)} sent a compressed answer, but only uncompressed answers are accepted.`
          })
        ),
      EgressTimeout: () =>
        Effect.fail(transient({ operation, status: null, message: `The exchange with ${peer} ran past its deadline.` })),
      EgressNetworkError: () =>
        Effect.fail(transient({ operation, status: null, message: `The connection to ${peer} failed.` }))
    })
  )
