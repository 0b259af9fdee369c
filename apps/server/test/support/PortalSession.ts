/**
 * A signed-in session of the Integrations area for API tests: a new account,
 * the single-use link opened for its cookie, the CSRF token read from
 * GET /api/session, and a request helper acting in that session.
 */
import { Effect, Option } from "effect"
import * as Server from "../../src/http/Server.js"
import { adminRequest, type Answer, request } from "./TestServer.js"

/** The listeners' base URLs of a server started with its Integrations area. */
export const urls = Effect.map(Server.Listening, (l) => ({
  admin: l.internalApi.url,
  public: Option.getOrThrow(l.publicApi).url,
  portal: Option.getOrThrow(l.portal).url
}))

/** One internal API call with the admin token. */
export const admin = (method: string, path: string, body?: unknown) => Effect.flatMap(urls, (u) => adminRequest(u.admin, method, path, body))

/** A signed-in session of a new account: its cookie and CSRF token, and a request helper acting in it. */
export const session = (mode: "live" | "demo" = "live") =>
  Effect.gen(function*() {
    const { portal } = yield* urls
    const account = (yield* admin("POST", "/v1/accounts", { name: "Portal test", mode })).json as { id: string }
    const link = (yield* admin("POST", `/v1/accounts/${account.id}/portal-sessions`)).json as { url: string }
    const entered = yield* request("GET", link.url)
    const cookie = (entered.headers.get("set-cookie") ?? "").split(";")[0]!
    const me = (yield* request("GET", `${portal}/api/session`, { headers: { cookie } })).json as { csrf_token: string }
    const call = (method: string, path: string, body?: unknown, csrf = true): Effect.Effect<Answer> =>
      request(method, `${portal}${path}`, {
        headers: {
          cookie,
          ...(csrf ? { "x-csrf-token": me.csrf_token } : {}),
          ...(body === undefined ? {} : { "content-type": "application/json" })
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) })
      })
    return { accountId: account.id, cookie, call }
  })
