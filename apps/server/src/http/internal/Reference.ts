/**
 * The API reference on the internal port (never on the public one, which
 * serves exactly the Event API's three pairs):
 *
 * - `GET /openapi/{internal-api,event-api,crm-bridge}.openapi.json`: the
 *   OpenAPI 3.1 documents as committed under `libs/contract/openapi/`;
 * - `GET /docs` (internal API), `/docs/event-api`, `/docs/crm-bridge`: each
 *   as a browsable page (Scalar, inlined: it works on a closed network).
 *
 * Both are readable without the admin token: they describe the APIs, they
 * do not touch data. The page's script is loaded when the server starts, not
 * by the CLI's other commands.
 */
import { HttpApi, HttpApiBuilder, HttpServerResponse, OpenApi } from "@effect/platform"
import { BridgeApi } from "@crm-relay/contract/BridgeApi"
import { EventApi } from "@crm-relay/contract/EventApi"
import { InternalApi } from "@crm-relay/contract/InternalApi"
import { DOCUMENTS, render } from "@crm-relay/contract/OpenApiDocuments"
import { Context, Effect, Layer } from "effect"

const documents = HttpApiBuilder.Router.use((router) =>
  Effect.forEach(Object.entries(DOCUMENTS), ([file, make]) => {
    // Rendered on first request, then kept: the documents never change while the process runs.
    let text: string | undefined
    return router.get(
      `/openapi/${file}`,
      Effect.sync(() => HttpServerResponse.text(text ??= render(make()), { contentType: "application/json" }))
    )
  }, { discard: true })
)

/**
 * A Scalar page at `path` showing the committed document `file` of `api`.
 * The page is given a copy of the API whose OpenAPI transform answers that
 * document: `OpenApi.fromApi` caches by API, whatever the options, so the
 * page must not ask for the original's.
 */
const page = (
  Scalar: typeof import("@effect/platform/HttpApiScalar"),
  path: `/${string}`,
  api: HttpApi.HttpApi.Any,
  file: keyof typeof DOCUMENTS
) =>
  Scalar.layer({ path }).pipe(
    Layer.provide(Layer.sync(HttpApi.Api, () => ({
      // A concrete API's groups are narrower than `AnyWithProps`; HttpApiBuilder widens the same way.
      api: (api as unknown as HttpApi.Api["Type"]["api"]).annotate(OpenApi.Transform, () => DOCUMENTS[file]()),
      context: Context.empty()
    })))
  )

const pages = Layer.unwrapEffect(
  Effect.map(Effect.promise(() => import("@effect/platform/HttpApiScalar")), (Scalar) =>
    Layer.mergeAll(
      page(Scalar, "/docs", InternalApi, "internal-api.openapi.json"),
      page(Scalar, "/docs/event-api", EventApi, "event-api.openapi.json"),
      page(Scalar, "/docs/crm-bridge", BridgeApi, "crm-bridge.openapi.json")
    ))
)

/** The reference routes, beside the internal API's on its router. */
export const routes = Layer.merge(documents, pages)
