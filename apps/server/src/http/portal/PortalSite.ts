/**
 * What the Integrations area's listener serves besides its API: the page
 * (the `apps/portal` build, read into memory once when the server starts),
 * the single-use link's landing route, and the headers every answer carries
 * (a strict Content-Security-Policy: everything from this origin, nothing
 * inline, no frames; no referrer, so a link's token never leaves in one).
 */
import { HttpApp, HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { PortalApi } from "@crm-relay/contract"
import { Clock, Effect, Option, Redacted } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as Executable from "../../Executable.js"
import { PortalSessions } from "./PortalSessions.js"

/** Headers of every answer of the portal's listener. */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "content-security-policy": "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; object-src 'none'",
  "referrer-policy": "no-referrer",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "cross-origin-opener-policy": "same-origin"
}

/** Adds the security headers to every answer of `app`, errors included (the answer is written before a wrapper would see it). */
export const withSecurityHeaders = <E, R>(app: HttpApp.HttpApp<HttpServerResponse.HttpServerResponse, E, R>) =>
  Effect.zipRight(
    HttpApp.appendPreResponseHandler((_request, response) => Effect.succeed(HttpServerResponse.setHeaders(response, SECURITY_HEADERS))),
    app
  )

const TYPES: Readonly<Record<string, string>> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".json": "application/json",
  ".txt": "text/plain; charset=utf-8"
}

interface Asset {
  readonly body: Uint8Array
  readonly type: string
}

/**
 * Where the built page is: `DIR/portal` beside the server's bundle (the build
 * copies it there) or the `apps/portal/dist` of the repository (development, tests),
 * whichever is found first walking up from this module.
 */
export const findAssets = (from: string = Path.dirname(fileURLToPath(import.meta.url))): Option.Option<string> => {
  let dir = from
  for (let i = 0; i < 8; i++) {
    for (const candidate of [Path.join(dir, "portal"), Path.join(dir, "apps", "portal", "dist")]) {
      if (Fs.existsSync(Path.join(candidate, "index.html"))) return Option.some(candidate)
    }
    const parent = Path.dirname(dir)
    if (parent === dir) break
    dir = parent
  }
  return Option.none()
}

/** Every file of the built page by URL path (`/index.html`, `/assets/…`). */
const load = (root: string): Map<string, Asset> => {
  const assets = new Map<string, Asset>()
  const walk = (dir: string) => {
    for (const item of Fs.readdirSync(dir, { withFileTypes: true })) {
      const file = Path.join(dir, item.name)
      if (item.isDirectory()) walk(file)
      else {
        const type = TYPES[Path.extname(item.name)]
        if (type !== undefined) assets.set(`/${Path.relative(root, file).split(Path.sep).join("/")}`, { body: Fs.readFileSync(file), type })
      }
    }
  }
  walk(root)
  return assets
}

/** The page's files the executable carries (`portal/…`), when this process is one. */
const carried = (): Map<string, Asset> | undefined => {
  const files = Executable.files("portal/")
  if (files === undefined) return undefined
  const assets = new Map<string, Asset>()
  for (const [name, body] of files) {
    const type = TYPES[Path.extname(name)]
    if (type !== undefined) assets.set(`/${name}`, { body, type })
  }
  return assets
}

const NOT_BUILT = "The Integrations area's page has not been built: run `npm run build`, then restart crm-relay."

/** The session cookie for `token`: HttpOnly, SameSite=Strict, Secure when the page is served over HTTPS. */
export const sessionCookie = (token: string, maxAgeSeconds: number, secure: boolean): string =>
  `${PortalApi.SESSION_COOKIE}=${token}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${maxAgeSeconds}${secure ? "; Secure" : ""}`

/** The page, its assets and the link's landing route, on the portal API's router. */
export const routes = (options: { readonly assetsDir: Option.Option<string>; readonly secureCookie: boolean }) =>
  HttpApiBuilder.Router.use((router) =>
    Effect.gen(function*() {
      const sessions = yield* PortalSessions
      // The executable's own copy first: it has no build beside it on disk.
      const assets = carried() ?? Option.match(options.assetsDir, { onNone: () => new Map<string, Asset>(), onSome: load })
      const index = assets.get("/index.html")
      if (index === undefined) yield* Effect.logWarning(NOT_BUILT)

      const page = Effect.succeed(
        index === undefined
          ? HttpServerResponse.text(NOT_BUILT, { status: 503 })
          : HttpServerResponse.uint8Array(index.body, { contentType: index.type, headers: { "cache-control": "no-cache" } })
      )
      yield* router.get("/", page)
      const favicon = assets.get("/favicon.svg")
      if (favicon !== undefined) {
        yield* router.get("/favicon.svg", Effect.succeed(HttpServerResponse.uint8Array(favicon.body, { contentType: favicon.type })))
      }
      yield* router.get(
        "/assets/*",
        Effect.map(HttpServerRequest.HttpServerRequest, (request) => {
          const asset = assets.get(new URL(request.url, "http://portal").pathname)
          return asset === undefined
            ? HttpServerResponse.text("Not found.", { status: 404 })
            // File names carry a content hash: a browser may keep them.
            : HttpServerResponse.uint8Array(asset.body, { contentType: asset.type, headers: { "cache-control": "public, max-age=31536000, immutable" } })
        })
      )
      yield* router.get(
        PortalApi.ENTER_PATH,
        Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          const token = new URL(request.url, "http://portal").searchParams.get("token") ?? ""
          const entered = yield* sessions.enter(token)
          if (Option.isNone(entered)) {
            return HttpServerResponse.empty({ status: 303, headers: { location: "/?link=invalid", "cache-control": "no-store" } })
          }
          const now = yield* Clock.currentTimeMillis
          const maxAge = Math.max(1, Math.floor((entered.value.expiresAt.getTime() - now) / 1000))
          return HttpServerResponse.empty({
            status: 303,
            headers: {
              location: "/",
              "cache-control": "no-store",
              "set-cookie": sessionCookie(Redacted.value(entered.value.token), maxAge, options.secureCookie)
            }
          })
        })
      )
    })
  )
