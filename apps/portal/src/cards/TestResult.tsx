/**
 * The result of a test event sent to a hook or a destination, read until its
 * first attempt is logged: delivered (the receiver's answer, or a broker's
 * confirmation), or why not and whether it will be retried.
 */
import { useEffect, useState } from "react"
import { type Client, type PortalApi, run } from "../api.js"

type Attempt = PortalApi.DeliveryDetail["attempt_log"][number]

const delivered = (last: Attempt) =>
  last.status_code === null
    ? `Test event delivered: the broker confirmed it in ${last.duration_ms} ms.`
    : `Test event delivered: the receiver answered ${last.status_code} in ${last.duration_ms} ms.`

export const TestResult = ({ client, deliveryId }: { readonly client: Client; readonly deliveryId: string }) => {
  const [detail, setDetail] = useState<PortalApi.DeliveryDetail | undefined>(undefined)
  useEffect(() => {
    let stop = false
    const poll = () =>
      void run(client.activity.delivery({ path: { id: deliveryId } })).then((result) => {
        if (stop) return
        if (result.ok) setDetail(result.value)
        if (!result.ok || result.value.attempt_log.length === 0) window.setTimeout(poll, 1000)
      })
    poll()
    return () => {
      stop = true
    }
  }, [client, deliveryId])
  const last = detail?.attempt_log[detail.attempt_log.length - 1]
  return (
    <p role="status" className={last === undefined ? "hint" : last.result === "delivered" ? "ok" : "error"} data-testid="test-result">
      {last === undefined
        ? "Test event queued; waiting for the receiver's answer…"
        : last.result === "delivered"
        ? delivered(last)
        : `Test event not delivered: ${last.error ?? last.error_class ?? "unknown error"}${last.result === "retry" ? " It will be retried." : ""}`}
    </p>
  )
}
