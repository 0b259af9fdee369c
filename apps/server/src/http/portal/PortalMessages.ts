/**
 * The sentences the Integrations area's API answers with: what happened and
 * what to do next, in the words of the page's reader.
 */

/** Sentences of this API's errors. */
export const messages = {
  noSession: "Your session has ended or was never opened: ask for a new link to the Integrations area.",
  csrf: "This change did not carry the page's security token; reload the page and try again.",
  rateLimited: "Too many requests from this session; wait a moment and try again.",
  unknownKey: "No integration key with this id exists in this account.",
  unknownHook: "No active hook with this id exists in this account; it may have been removed already.",
  unknownDelivery: "No delivery with this id exists in this account.",
  unknownPush: "No CRM push with this id exists in this account.",
  unknownRecovery: "No recovery with this id exists in this account.",
  disabledHere: "Disabled in the Integrations area.",
  tooManyHooks: (count: number, limit: number) =>
    `This account has ${count} hooks, the most it may have is ${limit}; remove one in the list above (or through DELETE /subscribe/{id}) before adding another.`,
  pushSucceeded: "This CRM push succeeded; there is nothing to replay.",
  notAllowed: (mode: string) =>
    `This is a ${mode} account: its calls never reach a real CRM, so a CRM bridge cannot be connected. ` +
    "Ask your account manager to switch the account to live when you are ready.",
  noConnection: (tenantId: string) => `This account has no stored bridge connection for tenant ${tenantId}; save one first.`,
  unknownDestination: "No destination with this id exists in this account; it may have been removed already.",
  /** What to change after a destination's check refused it, by the refusal's reason (none: the sentence says it all). */
  destinationNextStep: {
    unreachable: "Check the address and port, and that the broker is running and reachable from the internet; then create it again.",
    auth: "Check the user name and password (or the token) the broker expects; then create it again.",
    missing: "Create the exchange or stream on the broker first, or correct its name; then create it again.",
    refused: "Use the broker's public address, over TLS (amqps:// or tls://); then create it again."
  } as Readonly<Record<string, string>>,
  notFound: "Not found: this path is not part of the Integrations area."
} as const
