/**
 * Sessions of the Integrations area. No passwords and no user accounts: the
 * operator (the embedding service, which vouches for its user) mints a
 * single-use link for one account; opening it within `LINK_TTL` starts a
 * session bound to that account, once. The session ends after `IDLE_TIMEOUT`
 * without a request, at `ABSOLUTE_TIMEOUT` after it started, or when revoked.
 *
 * Link and session tokens are 256 random bits, stored only as their SHA-256
 * (looked up by hash, then compared in constant time, as integration keys
 * are). The CSRF token is an HMAC of the session token: the page reads it
 * once and sends it with every change; nothing more is stored.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Audit from "@crm-relay/store/Audit"
import { isUuid } from "@crm-relay/store/Ids"
import { Clock, Data, Duration, Effect, Option, Redacted } from "effect"
import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto"

/** How long a minted link can be opened. */
export const LINK_TTL = Duration.minutes(10)
/** A session without a request for this long ends. */
export const IDLE_TIMEOUT = Duration.minutes(30)
/** A session ends this long after its link was opened, however busy. */
export const ABSOLUTE_TIMEOUT = Duration.hours(12)
/** `last_seen_at` is written at most this often per session. */
const TOUCH_EVERY_MS = 30_000

/** The account of `mint` does not exist. */
export class UnknownAccount extends Data.TaggedError("UnknownAccount")<{ readonly accountId: string }> {}

/** A minted link's token (goes into the URL once) and when it stops opening. */
export interface MintedLink {
  readonly sessionId: string
  readonly token: Redacted.Redacted<string>
  readonly expiresAt: Date
}

/** A session a request acts in. */
export interface Session {
  readonly sessionId: string
  readonly accountId: string
  readonly expiresAt: Date
}

/** An opened link: the session and its cookie's token. */
export interface Entered extends Session {
  readonly token: Redacted.Redacted<string>
}

const digest = (text: string): Buffer => createHash("sha256").update(text, "utf8").digest()
const newToken = () => randomBytes(32).toString("base64url")
const sameDigest = (stored: Uint8Array, computed: Buffer) => stored.length === computed.length && timingSafeEqual(stored, computed)
const MAX_TOKEN_LENGTH = 128

/** The CSRF token of a session token. */
export const csrfToken = (session: Redacted.Redacted<string>): string =>
  createHmac("sha256", Redacted.value(session)).update("crm-relay/portal/csrf/v1").digest("base64url")

/** Whether `given` is the CSRF token of `session` (constant time). */
export const csrfMatches = (session: Redacted.Redacted<string>, given: string | undefined): boolean =>
  given !== undefined && given.length <= MAX_TOKEN_LENGTH && sameDigest(digest(csrfToken(session)), digest(given))

/** Mints links, opens them once, and authenticates and revokes sessions. */
export class PortalSessions extends Effect.Service<PortalSessions>()("@crm-relay/server/PortalSessions", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    return {
      /** A single-use link for `accountId`, valid for `LINK_TTL`. */
      mint: Effect.fn("PortalSessions.mint")(function*(accountId: string) {
        if (!isUuid(accountId)) return yield* new UnknownAccount({ accountId })
        const token = newToken()
        const now = yield* Clock.currentTimeMillis
        const expiresAt = new Date(now + Duration.toMillis(LINK_TTL))
        const rows = yield* sql<{ id: string }>`
          INSERT INTO portal_sessions (account_id, link_hash, link_expires_at)
          SELECT id, ${digest(token)}, ${expiresAt} FROM accounts WHERE id = ${accountId}
          RETURNING id`.pipe(Effect.orDie)
        const row = rows[0]
        if (row === undefined) return yield* new UnknownAccount({ accountId })
        yield* Audit.record("portal.link_minted", { account_id: accountId, portal_session_id: row.id })
        return { sessionId: row.id, token: Redacted.make(token), expiresAt } satisfies MintedLink
      }),

      /**
       * Opens the link of `token`: once, before it expires. The session token
       * returned goes into the cookie; none when the link is unknown, used or expired.
       */
      enter: Effect.fn("PortalSessions.enter")(function*(token: string) {
        if (token.length === 0 || token.length > MAX_TOKEN_LENGTH) return Option.none<Entered>()
        const now = new Date(yield* Clock.currentTimeMillis)
        const session = newToken()
        const expiresAt = new Date(now.getTime() + Duration.toMillis(ABSOLUTE_TIMEOUT))
        // One statement: two tabs opening the same link cannot both win.
        const rows = yield* sql<{ id: string; account_id: string; link_hash: Uint8Array }>`
          UPDATE portal_sessions SET entered_at = ${now}, last_seen_at = ${now}, expires_at = ${expiresAt},
            session_hash = ${digest(session)}
          WHERE link_hash = ${digest(token)} AND entered_at IS NULL AND revoked_at IS NULL AND link_expires_at > ${now}
          RETURNING id, account_id, link_hash`.pipe(Effect.orDie)
        const row = rows[0]
        if (row === undefined || !sameDigest(row.link_hash, digest(token))) return Option.none<Entered>()
        yield* Audit.identify(`portal_session:${row.id}`, row.account_id)
        yield* Audit.record("portal.session_started", { account_id: row.account_id, portal_session_id: row.id })
        return Option.some<Entered>({ sessionId: row.id, accountId: row.account_id, expiresAt, token: Redacted.make(session) })
      }),

      /** The live session of a cookie's token, its idle time restarted; none when unknown, idle, expired or revoked. */
      authenticate: Effect.fn("PortalSessions.authenticate")(function*(token: Redacted.Redacted<string>) {
        const text = Redacted.value(token)
        if (text.length === 0 || text.length > MAX_TOKEN_LENGTH) return Option.none<Session>()
        const hash = digest(text)
        const now = yield* Clock.currentTimeMillis
        const idleSince = new Date(now - Duration.toMillis(IDLE_TIMEOUT))
        const rows = yield* sql<{ id: string; account_id: string; session_hash: Uint8Array; expires_at: Date; last_seen_at: Date }>`
          SELECT id, account_id, session_hash, expires_at, last_seen_at FROM portal_sessions
          WHERE session_hash = ${hash} AND revoked_at IS NULL AND expires_at > ${new Date(now)} AND last_seen_at > ${idleSince}`
          .pipe(Effect.orDie)
        const row = rows[0]
        if (row === undefined || !sameDigest(row.session_hash, hash)) return Option.none<Session>()
        if (now - row.last_seen_at.getTime() >= TOUCH_EVERY_MS) {
          yield* sql`UPDATE portal_sessions SET last_seen_at = ${new Date(now)} WHERE id = ${row.id}`.pipe(Effect.orDie)
        }
        return Option.some<Session>({ sessionId: row.id, accountId: row.account_id, expiresAt: row.expires_at })
      }),

      /** Ends a session (idempotent). */
      revoke: Effect.fn("PortalSessions.revoke")(function*(sessionId: string) {
        if (!isUuid(sessionId)) return
        yield* sql`UPDATE portal_sessions SET revoked_at = COALESCE(revoked_at, now()) WHERE id = ${sessionId}`.pipe(Effect.orDie)
        yield* Audit.record("portal.session_revoked", { portal_session_id: sessionId })
      }),

      /** Ends every session and unused link of an account (the operator's "sign everyone out"). */
      revokeAccount: Effect.fn("PortalSessions.revokeAccount")(function*(accountId: string) {
        if (!isUuid(accountId)) return 0
        const rows = yield* sql`UPDATE portal_sessions SET revoked_at = now()
          WHERE account_id = ${accountId} AND revoked_at IS NULL RETURNING id`.pipe(Effect.orDie)
        yield* Audit.record("portal.sessions_revoked", { account_id: accountId, count: rows.length })
        return rows.length
      })
    }
  })
}) {}
