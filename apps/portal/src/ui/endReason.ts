/** Why a delivery ended without being delivered, in the page's words. */
export const endReasonText = {
  gone: "gone — the receiver said the hook no longer exists",
  aborted: "aborted — the receiver asked not to retry this message",
  disabled: "ended — the hook was disabled"
} as const

/** The attempt error classes that end a delivery, by the reason they stand for. */
const byErrorClass: Readonly<Record<string, keyof typeof endReasonText>> = {
  gone: "gone",
  subscription_gone: "gone",
  aborted: "aborted",
  subscription_disabled: "disabled"
}

/** The words for an ended delivery (its end reason) or attempt (its error class); undefined for anything else. */
export const endedAs = (reason: string | null): string | undefined => {
  const key = reason === null ? undefined : byErrorClass[reason] ?? (reason === "disabled" ? "disabled" : undefined)
  return key === undefined ? undefined : endReasonText[key]
}
