/**
 * The command line bridge's certificate authority, kept in two files (the CA
 * certificate and its key) so it survives restarts: a server that trusts the
 * CA file keeps trusting every later start, and only the server certificate
 * is issued again.
 */
import { Certificate } from "@crm-relay/testing"
import { FileSystem, Path } from "@effect/platform"
import { Effect, Either, Option } from "effect"
import { createPrivateKey, X509Certificate } from "node:crypto"

/** Where the CA lives: its certificate (the file to trust) and its private key. */
export interface CaPaths {
  readonly cert: string
  readonly key: string
}

/** The key file beside a CA certificate file: `bridge-ca.pem` → `bridge-ca.key.pem`. */
export const keyPathOf = (certPath: string): string =>
  certPath.endsWith(".pem") ? `${certPath.slice(0, -4)}.key.pem` : `${certPath}.key`

/** Which CA is in use and whether it was made now or read back. */
export interface LoadedCa {
  readonly ca: Certificate.CertificateAuthority
  readonly reused: boolean
  /** Why stored files were not reused, when they existed. */
  readonly replaced: Option.Option<string>
}

// Why a stored pair cannot be used, or none when it can.
const unusable = (ca: Certificate.CertificateAuthority, now: Date): string | undefined =>
  Either.getOrElse(
    Either.try(() => {
      const cert = new X509Certificate(ca.cert)
      if (!cert.ca) return "the certificate is not a CA"
      if (new Date(cert.validTo) <= now) return "the CA has expired"
      if (!cert.checkPrivateKey(createPrivateKey(ca.key))) return "the key does not belong to the certificate"
      return undefined
    }),
    () => "the files are not a PEM certificate and key"
  )

/**
 * The CA at `paths`, or a new one written there (certificate 0644, key 0600)
 * when the files are missing or unusable.
 */
export const loadOrCreate = Effect.fn("CaFiles.loadOrCreate")(function*(paths: CaPaths) {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const stored = (yield* fs.exists(paths.cert)) && (yield* fs.exists(paths.key))
    ? Option.some({ cert: yield* fs.readFileString(paths.cert), key: yield* fs.readFileString(paths.key) })
    : Option.none()
  const replaced = Option.flatMap(stored, (ca) => Option.fromNullable(unusable(ca, new Date())))
  if (Option.isSome(stored) && Option.isNone(replaced)) {
    return { ca: stored.value, reused: true, replaced } satisfies LoadedCa
  }
  const ca = yield* Certificate.generateAuthority({ notAfter: new Date(Date.now() + 5 * 365 * 24 * 60 * 60 * 1000) })
  for (const file of [paths.cert, paths.key]) yield* fs.makeDirectory(path.dirname(file), { recursive: true })
  // The key first and private: a reader of the certificate never sees a CA without its key.
  yield* fs.writeFileString(paths.key, ca.key, { mode: 0o600 })
  yield* fs.chmod(paths.key, 0o600)
  yield* fs.writeFileString(paths.cert, ca.cert)
  return { ca, reused: false, replaced } satisfies LoadedCa
})
