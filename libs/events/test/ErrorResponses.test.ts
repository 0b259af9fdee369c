/**
 * The Error-object middleware on a small HttpApi served through
 * HttpApiBuilder: every error the API declares is answered with its own
 * schema and status annotation (not only the contract's), while request
 * decoding, unknown routes and anything undeclared keep their answers.
 */
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup, HttpServer } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Events } from "@crm-relay/contract"
import { Effect, Layer, Logger, LogLevel, Schema } from "effect"
import * as ErrorResponses from "../src/ErrorResponses.js"

class Taken extends Schema.TaggedError<Taken>()("Taken", { error: Schema.String }) {
  static readonly wire = Events.errorObject(this, 409, "Already taken.", "TakenError")
}
class Refused extends Schema.TaggedError<Refused>()("Refused", {
  error: Schema.String,
  field: Schema.optionalWith(Schema.String, { exact: true })
}) {
  static readonly wire = Events.errorObject(this, 422, "Refused.", "RefusedError")
}
class NotReady extends Schema.TaggedError<NotReady>()("NotReady", { error: Schema.String }) {
  static readonly wire = Events.errorObject(this, 503, "Not ready.", "NotReadyError")
}

/** Declared nowhere in the API. */
class Stray extends Schema.TaggedError<Stray>()("Stray", { error: Schema.String }) {}

class TestApi extends HttpApi.make("test").add(
  HttpApiGroup.make("things")
    .add(HttpApiEndpoint.post("take", "/take").addError(Taken.wire).addError(Events.NotFound.wire))
    .add(HttpApiEndpoint.post("refuse", "/refuse/:field").setPath(Schema.Struct({ field: Schema.String })).addError(Refused.wire))
    .add(HttpApiEndpoint.get("ready", "/ready").addError(NotReady.wire))
    .add(HttpApiEndpoint.post("echo", "/echo").setPayload(Schema.Struct({ name: Schema.String })).addSuccess(Schema.Struct({ name: Schema.String })))
    .add(HttpApiEndpoint.get("gone", "/gone").addError(Events.NotFound.wire))
    .add(HttpApiEndpoint.get("stray", "/stray"))
    .add(HttpApiEndpoint.get("dies", "/dies"))
    .add(HttpApiEndpoint.get("interrupted", "/interrupted"))
) {}

const ThingsLive = HttpApiBuilder.group(TestApi, "things", (handlers) =>
  handlers
    .handle("take", () => new Taken({ error: "The name is already taken." }))
    .handle("refuse", ({ path }) =>
      new Refused(path.field === "-" ? { error: "Refused as a whole." } : { error: "Refused.", field: path.field }))
    .handle("ready", () => new NotReady({ error: "The database does not answer." }))
    .handle("echo", ({ payload }) => Effect.succeed(payload))
    .handle("gone", () => new Events.NotFound({ error: "No such thing." }))
    // A defect carrying an error class the API does not declare.
    .handle("stray", () => Effect.die(new Stray({ error: "Internal detail." })))
    // A declared error class escaping as a defect is still that error.
    .handle("dies", () => Effect.die(new Taken({ error: "Taken, as a defect." })))
    .handle("interrupted", () => Effect.interrupt))

const NOT_FOUND = "Not found: this API serves /take and a few others."

const handler = (messages: ErrorResponses.Messages) => {
  const web = HttpApiBuilder.toWebHandler(
    Layer.mergeAll(
      HttpApiBuilder.api(TestApi).pipe(Layer.provide(ThingsLive)),
      ErrorResponses.layer(messages),
      HttpServer.layerContext,
      // The 500 case logs "Unexpected failure" by design; keep the test output quiet.
      Logger.minimumLogLevel(LogLevel.None)
    )
  )
  return Effect.acquireRelease(Effect.succeed(web), () => Effect.promise(web.dispose))
}

const call = (method: string, path: string, body?: string, messages: ErrorResponses.Messages = { notFound: NOT_FOUND }) =>
  Effect.gen(function*() {
    const web = yield* handler(messages)
    const response = yield* Effect.promise(() =>
      web.handler(
        new Request(`http://localhost${path}`, {
          method,
          ...(body === undefined ? {} : { body, headers: { "content-type": "application/json" } })
        })
      )
    )
    return { status: response.status, json: yield* Effect.promise(() => response.json()) as Effect.Effect<unknown> }
  }).pipe(Effect.scoped)

describe("ErrorResponses", () => {
  it.effect("an error the API declares with errorObject is answered with its status and exactly the Error object (409, 422 with a field, 503)", () =>
    Effect.gen(function*() {
      expect(yield* call("POST", "/take")).toEqual({ status: 409, json: { error: "The name is already taken." } })
      expect(yield* call("POST", "/refuse/name")).toEqual({ status: 422, json: { error: "Refused.", field: "name" } })
      expect(yield* call("POST", "/refuse/-")).toEqual({ status: 422, json: { error: "Refused as a whole." } })
      expect(yield* call("GET", "/ready")).toEqual({ status: 503, json: { error: "The database does not answer." } })
    }))

  it.effect("a declared error escaping as a defect is still answered as declared", () =>
    Effect.gen(function*() {
      expect(yield* call("GET", "/dies")).toEqual({ status: 409, json: { error: "Taken, as a defect." } })
    }))

  it.effect("the contract's errors, request decoding and unknown routes keep their answers", () =>
    Effect.gen(function*() {
      expect(yield* call("GET", "/gone")).toEqual({ status: 404, json: { error: "No such thing." } })
      expect(yield* call("POST", "/echo", "{}")).toEqual({ status: 400, json: { error: "name is required." } })
      expect(yield* call("POST", "/echo", "{")).toEqual({ status: 400, json: { error: "The request body is not valid JSON." } })
      expect(yield* call("GET", "/nowhere")).toEqual({
        status: 404,
        json: { error: "Not found: this API serves /take and a few others." }
      })
      expect(yield* call("POST", "/echo", "{\"name\":\"ok\"}")).toEqual({ status: 200, json: { name: "ok" } })
    }))

  it.effect("an error the API does not declare is the generic 500 Error object, never its own fields", () =>
    Effect.gen(function*() {
      expect(yield* call("GET", "/stray")).toEqual({ status: 500, json: { error: "The service failed unexpectedly; retry later." } })
    }))

  it.effect("strict (the public port): \"the only statuses are the contract's\" — an undeclared failure or an interruption is 502 with the Error object, never 500 or 503", () =>
    Effect.gen(function*() {
      const strict = { notFound: NOT_FOUND, strict: true }
      const unreachable = {
        status: 502,
        json: { error: "The service failed before it could answer; retry reads later and check existing hooks before repeating a POST." }
      }
      expect(yield* call("GET", "/stray", undefined, strict)).toEqual(unreachable)
      expect(yield* call("GET", "/interrupted", undefined, strict)).toEqual(unreachable)
      // Declared errors keep their own statuses.
      expect(yield* call("POST", "/take", undefined, strict)).toEqual({ status: 409, json: { error: "The name is already taken." } })
    }))

  it.effect("serves: only the exact pairs reach the router; a lookalike is the API's 404 before any routing", () =>
    Effect.gen(function*() {
      const exact = { notFound: NOT_FOUND, serves: (method: string, url: string) => method === "POST" && url === "/take" }
      expect(yield* call("POST", "/take", undefined, exact)).toEqual({ status: 409, json: { error: "The name is already taken." } })
      for (const path of ["/TAKE", "/take/", "//take", "/take;x"]) {
        expect(yield* call("POST", path, undefined, exact)).toEqual({ status: 404, json: { error: NOT_FOUND } })
      }
    }))

  it("nestedDeeperThan counts brackets outside strings only", () => {
    expect(ErrorResponses.nestedDeeperThan("[[[]]]", 3)).toBe(false)
    expect(ErrorResponses.nestedDeeperThan("[[[[]]]]", 3)).toBe(true)
    expect(ErrorResponses.nestedDeeperThan(JSON.stringify({ a: "[[[[[\\\"{{{{" }), 1)).toBe(false)
    expect(ErrorResponses.nestedDeeperThan("{\"a\":{\"b\":{\"c\":{}}}}", 3)).toBe(true)
  })
})
