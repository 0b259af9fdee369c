/**
 * Loopback TLS material for tests and the demo: a throwaway certificate
 * authority and a server certificate it signed.
 */
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

/**
 * Generates a CA and a server certificate valid for `dnsNames` and `ips`
 * (loopback names by default). EC P-256 keeps generation fast.
 */
export const generateTlsMaterial = (names: {
  readonly dnsNames: ReadonlyArray<string>
  readonly ips: ReadonlyArray<string>
} = LOOPBACK_NAMES): Effect.Effect<TlsMaterial, CertificateError> =>
  Effect.tryPromise({
    try: async () => {
      const notBeforeDate = new Date(Date.now() - DAY)
      const notAfterDate = new Date(Date.now() + 30 * DAY)
      const ca = await generate([{ name: "commonName", value: "crm-relay test CA" }], {
        keyType: "ec",
        curve: "P-256",
        algorithm: "sha256",
        notBeforeDate,
        notAfterDate,
        extensions: [
          { name: "basicConstraints", cA: true, critical: true },
          { name: "keyUsage", keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true }
        ]
      })
      const server = await generate([{ name: "commonName", value: names.dnsNames[0] ?? "localhost" }], {
        keyType: "ec",
        curve: "P-256",
        algorithm: "sha256",
        notBeforeDate,
        notAfterDate,
        ca: { key: ca.private, cert: ca.cert },
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
      return { ca: ca.cert, cert: server.cert, key: server.private }
    },
    catch: (cause) => new CertificateError({ cause })
  })
