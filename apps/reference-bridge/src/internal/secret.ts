/** Secret handling: digests and constant-time comparison. */
import { createHash, timingSafeEqual } from "node:crypto"

/** SHA-256 of a UTF-8 string. */
export const digest = (value: string): Buffer => createHash("sha256").update(value, "utf8").digest()

/** Whether two secrets are equal, in time independent of where they differ (equal-length digests). */
export const constantTimeEquals = (presented: string, expected: string): boolean =>
  timingSafeEqual(digest(presented), digest(expected))

/**
 * The index of the stored digest a presented secret matches, or -1. Every
 * entry is compared, so the time taken does not reveal which one matched.
 */
export const matchDigest = (presented: string, digests: ReadonlyArray<Buffer>): number => {
  const presentedDigest = digest(presented)
  let found = -1
  digests.forEach((candidate, index) => {
    if (timingSafeEqual(presentedDigest, candidate) && found === -1) found = index
  })
  return found
}
