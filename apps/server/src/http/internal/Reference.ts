/**
 * The API reference on the internal port (never on the public one, which
 * serves exactly the Event API's three pairs):
 *
 * - `GET /openapi/{internal-api,event-api,crm-bridge,portal-api}.openapi.json`: the
 *   OpenAPI 3.1 documents as committed under `libs/contract/openapi/`;
 * - `GET /docs` (internal API), `/docs/event-api`, `/docs/crm-bridge`, `/docs/portal-api`: each
 *   as a browsable page (Scalar, inlined: it works on a closed network).
 *
 * Both are readable without the admin token: they describe the APIs, they
 * do not touch data. Nothing is rendered before the first request: the
 * documents and the page script cost the server's start nothing.
 */
import { HttpApiBuilder, HttpLayerRouter, HttpServerResponse, OpenApi } from "@effect/platform"
import type { HttpApi } from "@effect/platform"
import { BridgeApi } from "@crm-relay/contract/BridgeApi"
import { EventApi } from "@crm-relay/contract/EventApi"
import { InternalApi } from "@crm-relay/contract/InternalApi"
import { PortalApi } from "@crm-relay/contract/PortalApi"
import { DOCUMENTS, render } from "@crm-relay/contract/OpenApiDocuments"
import { Effect, Layer, Scope } from "effect"

/** The reference pages: path, the API described, and its committed document. */
const PAGES = [
  { path: "/docs", api: InternalApi, file: "internal-api.openapi.json" },
  { path: "/docs/event-api", api: EventApi, file: "event-api.openapi.json" },
  { path: "/docs/crm-bridge", api: BridgeApi, file: "crm-bridge.openapi.json" },
  { path: "/docs/portal-api", api: PortalApi, file: "portal-api.openapi.json" }
] as const satisfies ReadonlyArray<{ path: `/${string}`; api: HttpApi.HttpApi.Any; file: keyof typeof DOCUMENTS }>

/**
 * The pages as one HTTP handler, built once. Each page is given a copy of
 * its API whose OpenAPI transform answers the committed document (with its
 * examples): `OpenApi.fromApi` caches by API whatever the options, so the
 * page must not ask for the original's.
 */
const pagesHandler = Effect.gen(function*() {
  const Scalar = yield* Effect.promise(() => import("@effect/platform/HttpApiScalar"))
  const page = ({ api, file, path }: typeof PAGES[number]) =>
    Scalar.layerHttpLayerRouter({ path, api: api.annotate(OpenApi.Transform, () => DOCUMENTS[file]()) })
  return yield* HttpLayerRouter.toHttpEffect(Layer.mergeAll(page(PAGES[0]), page(PAGES[1]), page(PAGES[2]), page(PAGES[3])))
})

/** The reference routes, beside the internal API's on its router. */
export const routes = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function*() {
    // Built by the first request, in the scope of the server's router (it lives as long as the listener).
    const pages = yield* Effect.cached(Scope.extend(pagesHandler, yield* Effect.scope))
    yield* Effect.forEach(PAGES, ({ path }) => router.get(path, Effect.flatten(pages)), { discard: true })
    yield* Effect.forEach(Object.entries(DOCUMENTS), ([file, make]) => {
      let text: string | undefined
      return router.get(
        `/openapi/${file}`,
        Effect.sync(() => HttpServerResponse.text(text ??= render(make()), { contentType: "application/json" }))
      )
    }, { discard: true })
  })
)
