/** Reading a Bearer credential from an Authorization header (Authentication rules 1–2). */
import { Option, Redacted } from "effect"

/**
 * The credential of `Authorization: Bearer <credential>`; none when the
 * header is missing, uses another scheme, or the credential is empty.
 */
export const bearerCredential = (header: string | undefined): Option.Option<Redacted.Redacted> => {
  const match = header === undefined ? null : /^Bearer +(\S+)\s*$/i.exec(header)
  return match === null ? Option.none() : Option.some(Redacted.make(match[1]!))
}

/** The scheme word of an Authorization header (`Bearer`, `Basic`), never the credential. */
export const authorizationScheme = (header: string | undefined): string | undefined =>
  header === undefined ? undefined : header.trim().split(/\s+/)[0]
