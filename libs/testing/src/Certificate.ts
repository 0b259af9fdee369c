/**
 * Loopback TLS material for tests and the demo: a throwaway certificate
 * authority and a server certificate it signed.
 */
import { randomUUID } from "node:crypto"
import { Data, Effect } from "effect"
import { generate } from "selfsigned"

/** A CA certificate and a server certificate and key it signed, all PEM. */
export interface TlsMaterial {
  /** The CA certificate: trust this (egress `ca`, or `NODE_EXTRA_CA_CERTS`). */
  readonly ca: string
  /** The server certificate, for `https.createServer({ cert })`. */
  readonly cert: string
  /** The server's private key, for `https.createServer({ key })`. */
  readonly key: string
}

/** The certificate generator failed. */
export class CertificateError extends Data.TaggedError("CertificateError")<{ readonly cause: unknown }> {}

/** Names a loopback server answers to by default. */
export const LOOPBACK_NAMES = {
  dnsNames: ["localhost", "bridge.localhost", "receiver.localhost"],
  ips: ["127.0.0.1", "::1"]
} as const

const DAY = 24 * 60 * 60 * 1000

/** A certificate authority: its certificate and private key, PEM. Keep the key to issue again later. */
export interface CertificateAuthority {
  readonly cert: string
  readonly key: string
}

/** When a certificate is valid; default from a day ago to 30 days ahead. */
export interface Validity {
  readonly notBefore?: Date
  readonly notAfter?: Date
}

const validity = (options: Validity = {}) => ({
  notBeforeDate: options.notBefore ?? new Date(Date.now() - DAY),
  notAfterDate: options.notAfter ?? new Date(Date.now() + 30 * DAY)
})

// PEM files end with a newline; tools that concatenate bundles (NODE_EXTRA_CA_CERTS) expect it.
const withNewline = (pem: string): string => (pem.endsWith("\n") ? pem : `${pem}\n`)

/** Generates a certificate authority (EC P-256, which keeps generation fast). */
export const generateAuthority = (options: Validity = {}): Effect.Effect<CertificateAuthority, CertificateError> =>
  Effect.tryPromise({
    try: async () => {
      // Each CA its own subject: a client trusting two CAs picks the issuer by subject name.
      const ca = await generate([{ name: "commonName", value: `crm-relay test CA ${randomUUID()}` }], {
        keyType: "ec",
        curve: "P-256",
        algorithm: "sha256",
        ...validity(options),
        extensions: [
          { name: "basicConstraints", cA: true, critical: true },
          { name: "keyUsage", keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true }
        ]
      })
      return { cert: withNewline(ca.cert), key: withNewline(ca.private) }
    },
    catch: (cause) => new CertificateError({ cause })
  })

/** Issues a server certificate and key for `names`, signed by `ca`. */
export const issue = (
  ca: CertificateAuthority,
  names: { readonly dnsNames: ReadonlyArray<string>; readonly ips: ReadonlyArray<string> } = LOOPBACK_NAMES,
  options: Validity = {}
): Effect.Effect<{ readonly cert: string; readonly key: string }, CertificateError> =>
  Effect.tryPromise({
    try: async () => {
      const server = await generate([{ name: "commonName", value: names.dnsNames[0] ?? "localhost" }], {
        keyType: "ec",
        curve: "P-256",
        algorithm: "sha256",
        ...validity(options),
        ca: { key: ca.key, cert: ca.cert },
        extensions: [
          { name: "basicConstraints", cA: false },
          { name: "keyUsage", digitalSignature: true, keyEncipherment: true, critical: true },
          { name: "extKeyUsage", serverAuth: true },
          {
            name: "subjectAltName",
            altNames: [
              ...names.dnsNames.map((value) => ({ type: 2 as const, value })),
              ...names.ips.map((ip) => ({ type: 7 as const, ip }))
            ]
          }
        ]
      })
      return { cert: withNewline(server.cert), key: withNewline(server.private) }
    },
    catch: (cause) => new CertificateError({ cause })
  })

/**
 * Generates a CA and a server certificate valid for `dnsNames` and `ips`
 * (loopback names by default).
 */
export const generateTlsMaterial = (names: {
  readonly dnsNames: ReadonlyArray<string>
  readonly ips: ReadonlyArray<string>
} = LOOPBACK_NAMES): Effect.Effect<TlsMaterial, CertificateError> =>
  Effect.flatMap(generateAuthority(), (ca) => Effect.map(issue(ca, names), (server) => ({ ca: ca.cert, ...server })))
