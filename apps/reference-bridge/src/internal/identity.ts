/**
 * Contact identity as the reference CRM matches it: phones by their digits,
 * emails case-insensitively. Nothing fuzzier, so a search never invents a
 * match (Operation rule 2).
 */

/** The digits of a phone string, or `undefined` when it has none. */
export const normalizePhone = (phone: string): string | undefined => {
  const digits = phone.replace(/\D/g, "")
  return digits === "" ? undefined : digits
}

/** A trimmed, lower-cased email, or `undefined` when blank. */
export const normalizeEmail = (email: string): string | undefined => {
  const trimmed = email.trim().toLowerCase()
  return trimmed === "" ? undefined : trimmed
}

/** The normalized identities of a contact. */
export interface Identities {
  readonly phones: ReadonlyArray<string>
  readonly emails: ReadonlyArray<string>
}

const defined = <A>(values: ReadonlyArray<A | undefined>): Array<A> =>
  [...new Set(values.filter((v): v is A => v !== undefined))]

/** Normalized, de-duplicated phones and emails. */
export const identities = (contact: { readonly phones: ReadonlyArray<string>; readonly emails: ReadonlyArray<string> }): Identities => ({
  phones: defined(contact.phones.map(normalizePhone)),
  emails: defined(contact.emails.map(normalizeEmail))
})

/** Whether two identity sets share a phone or an email. */
export const intersects = (a: Identities, b: Identities): boolean =>
  a.phones.some((p) => b.phones.includes(p)) || a.emails.some((e) => b.emails.includes(e))
