/**
 * Every error of our HTTP APIs is the Error object `{"error": "One
 * sentence."}` (plus `retryAfterSeconds` on 429) — never a stack trace and
 * never a library's own format. This middleware sits inside
 * `HttpApiBuilder` (before it would encode errors itself) and turns every
 * failure and defect into that object: the contract's errors by their wire
 * schemas, request-decoding failures as 400, unknown routes and methods as
 * 404, every other error the served API declares by its own schema and
 * status annotation (e.g. a 409 built with `Events.errorObject`), an
 * unreachable database as 502. It also caps request bodies (413, see
 * `tooLarge`), reading them to the end so the answer is read, and reads a
 * request that sends nothing as `{}` (see EmptyBody). Strict (the
 * public port): only the API's exact pairs reach the router, and no 500 or
 * 503 is ever answered.
 */
import { HttpApi, HttpApiBuilder, HttpApiSchema, type HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import * as FileSystem from "@effect/platform/FileSystem"
import * as HttpIncomingMessage from "@effect/platform/HttpIncomingMessage"
import * as HttpServerError from "@effect/platform/HttpServerError"
import { Events } from "@crm-relay/contract"
import { Cause, Context, Data, Effect, Layer, Option, ParseResult, Predicate, Schema, type SchemaAST, Stream } from "effect"
import * as EmptyBody from "./EmptyBody.js"

/** Request bodies above this are refused with 413 (see `tooLarge`). */
export const MAX_BODY_BYTES = 64 * 1024

/** Sentences for the cases whose wording depends on the API, and how strictly it is served. */
export interface Messages {
  /** An unknown path or method. */
  readonly notFound: string
  /**
   * The exact method and raw request target pairs the API serves; every other request is
   * answered `notFound` before the (lenient) router sees it. All pairs reach the router when absent.
   */
  readonly serves?: ((method: string, url: string) => boolean) | undefined
  /**
   * Answer only the contract's statuses: an interruption or an unexpected failure is a 502 with
   * the Error object (the failure logged with its trace), never a 500 or 503.
   */
  readonly strict?: boolean | undefined
  /**
   * The answer to a request whose input is refused (`sentence` says why: a
   * field missing or of the wrong type, a body that is not JSON or too
   * large), for routes that answer mistakes in their own shape; none keeps
   * the 400 Error object. The in-call routes answer `{ok: false, reason:
   * "rejected", message}`: the voice agent acts on that mid-call, not on a 400.
   */
  readonly refusedInput?:
    | ((request: HttpServerRequest.HttpServerRequest, sentence: string) => Option.Option<HttpServerResponse.HttpServerResponse>)
    | undefined
}

/** Request bodies nested deeper than this (arrays and objects) are refused with 400 before parsing. */
export const MAX_JSON_DEPTH = 32

const encodeBadRequest = Schema.encodeSync(Events.BadRequest.wire)
const encodeUnauthorized = Schema.encodeSync(Events.Unauthorized.wire)
const encodeNotFound = Schema.encodeSync(Events.NotFound.wire)
const encodeRateLimited = Schema.encodeSync(Events.RateLimited.wire)
const encodeUnavailable = Schema.encodeSync(Events.Unavailable.wire)

const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  HttpServerResponse.unsafeJson(body, { status, headers })

/** The 400 answer. */
export const badRequest = (error: string) => json(400, encodeBadRequest(new Events.BadRequest({ error })))

/** The sentence of a body over `MAX_BODY_BYTES`: what happened and what to do. */
export const TOO_LARGE = `The request body is larger than ${MAX_BODY_BYTES} bytes, the most this server accepts; send a body of at most ${MAX_BODY_BYTES} bytes.`

/** Whether `request` declares a body longer than `MAX_BODY_BYTES`. */
export const declaresTooLarge = (request: BodyHeaders): boolean => Number(header(request, "content-length") ?? "0") > MAX_BODY_BYTES

/**
 * The answer to a body over `MAX_BODY_BYTES` (RFC 9110 §15.5.14): 413 with the Error object, and
 * `Connection: close`: the rest of a declared body is never read (the server lingers, see the HTTP edge).
 */
export const tooLarge = HttpServerResponse.unsafeJson({ error: TOO_LARGE }, { status: 413, headers: { connection: "close" } })

/**
 * A body over `MAX_BODY_BYTES` found where only the contract's failures may be declared (the
 * public key check): it travels as a defect and is answered `tooLarge`, a status of no endpoint's.
 */
export class BodyTooLarge extends Data.TaggedError("BodyTooLarge") {}
const TOO_DEEP = `The request body is nested deeper than ${MAX_JSON_DEPTH} levels.`
/** The 400 sentence of a body declared JSON that does not parse. */
export const NOT_JSON = "The request body is not valid JSON."

/** The headers a request's body is judged by: the platform's request, or Node's before any router. */
export interface BodyHeaders {
  readonly headers: { readonly [name: string]: string | ReadonlyArray<string> | undefined }
}

/** A single-valued header of `request` (the body's headers always are). */
const header = (request: BodyHeaders, name: string): string | undefined => {
  const value = request.headers[name]
  return typeof value === "string" ? value : undefined
}

/** The media type of a request, lower-cased, without parameters ("" when absent). */
export const mediaType = (request: BodyHeaders): string => (header(request, "content-type") ?? "").split(";")[0]!.trim().toLowerCase()

/** Whether the request declares a JSON body. */
export const isJson = (request: BodyHeaders): boolean => mediaType(request) === "application/json"

/** Whether `request` says it carries a body (a length other than 0, or a transfer coding). */
export const hasBody = (request: BodyHeaders): boolean => {
  const length = header(request, "content-length")
  return (length !== undefined && length !== "0") || request.headers["transfer-encoding"] !== undefined
}

const CONTENT_TYPE = "Content-Type must be application/json."

/**
 * Whether the JSON text `text` nests arrays and objects deeper than `limit`: a scan of its
 * brackets outside strings, so that no parser or error-message builder ever recurses that deep.
 */
export const nestedDeeperThan = (text: string, limit: number): boolean => {
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 92) i++ // backslash: skip the escaped character
      else if (c === 34) inString = false
    } else if (c === 34) {
      inString = true
    } else if (c === 91 || c === 123) {
      if (++depth > limit) return true
    } else if (c === 93 || c === 125) {
      depth--
    }
  }
  return false
}

/**
 * Refuses a body that is not declared JSON without reading it, then reads it (capped at
 * `MAX_BODY_BYTES`) and refuses one nested deeper than `MAX_JSON_DEPTH`. The request keeps
 * the text it read, so decoding the payload afterwards parses that same text.
 */
export const guardJsonBody = (request: HttpServerRequest.HttpServerRequest): Effect.Effect<void, Events.BadRequest> => {
  if (!isJson(request)) return Effect.fail(new Events.BadRequest({ error: CONTENT_TYPE }))
  if (declaresTooLarge(request)) return Effect.die(new BodyTooLarge())
  return request.text.pipe(
    Effect.provideService(HttpIncomingMessage.MaxBodySize, Option.some(FileSystem.Size(MAX_BODY_BYTES))),
    Effect.catchAll((error) =>
      error.cause instanceof Error && error.cause.message === "maxBytes exceeded"
        ? Effect.die(new BodyTooLarge())
        : Effect.fail(new Events.BadRequest({ error: "The request body could not be read." }))
    ),
    Effect.flatMap((text) =>
      nestedDeeperThan(text, MAX_JSON_DEPTH) ? Effect.fail(new Events.BadRequest({ error: TOO_DEEP })) : Effect.void
    )
  )
}

interface DecodeIssue {
  readonly _tag: string
  readonly path: ReadonlyArray<PropertyKey>
  readonly message: string
}

/** One sentence from the first issue of a decoding failure (of a body, or of a query when `inQuery`). */
const decodeMessage = (issues: ReadonlyArray<DecodeIssue>, inQuery: boolean): string => {
  const issue = issues[0]
  if (issue === undefined) return "The request could not be accepted."
  const field = issue.path.map(String).join(".")
  if (field === "") return "The request body must be a JSON object."
  if (issue._tag === "Missing") return `${field} is required.`
  // A union of literals fails once per member: name them all.
  const literals = issues
    .filter((other) => other.path.map(String).join(".") === field)
    .map((other) => /^Expected "([^"]*)", actual/.exec(other.message)?.[1])
  if (literals.length > 1 && literals.every((l) => l !== undefined)) return `${field} must be one of: ${literals.join(", ")}.`
  const expected = /^Expected (\w+), actual (.)/.exec(issue.message)
  // A query parameter given several times arrives as an array.
  if (expected !== null && inQuery && expected[2] === "[") return `${field} must be given once.`
  if (expected !== null) return `${field} must be a ${expected[1]}.`
  const sentence = issue.message.split("\n")[0]!.trim()
  // Custom messages (e.g. the contract's limit) already name the field.
  const text = sentence.startsWith(field) ? sentence : `${field} is invalid: ${sentence}`
  return text.endsWith(".") ? text : `${text}.`
}

/**
 * The sentence this API answers for a request that fails `schema` with
 * `error`, for callers that validate the same input without HTTP (the CLI
 * on the database), so both paths say the same thing.
 */
export const decodeFailureSentence = (error: ParseResult.ParseError, inQuery = false): string =>
  decodeMessage(ParseResult.ArrayFormatter.formatErrorSync(error), inQuery)

const isTag = (tag: string) => (u: unknown): boolean => Predicate.isTagged(u, tag)

/** An error schema the served API declares, with its status annotation. */
interface DeclaredError {
  readonly is: (u: unknown) => boolean
  readonly status: number
  readonly encode: (error: unknown) => Effect.Effect<unknown, ParseResult.ParseError>
}

// Built once per API, on its first error: every JSON error schema of the API, its groups and endpoints.
const declaredByApi = new WeakMap<object, ReadonlyArray<DeclaredError>>()

const declaredErrors = ({ api, context }: HttpApi.Api["Type"]): ReadonlyArray<DeclaredError> => {
  const known = declaredByApi.get(api)
  if (known !== undefined) return known
  const schemas = new Set<Schema.Schema.Any>()
  const add = (schema: { readonly ast: SchemaAST.AST }) => HttpApiSchema.deunionize(schemas, Schema.make(schema.ast))
  add(api.errorSchema)
  for (const group of Object.values(api.groups)) {
    add(group.errorSchema)
    for (const endpoint of Object.values(group.endpoints)) add(endpoint.errorSchema)
  }
  const declared = Array.from(schemas)
    .filter((schema) => !HttpApiSchema.isVoid(schema.ast) && HttpApiSchema.getEncoding(schema.ast).kind === "Json")
    .map((member): DeclaredError => {
      // Error schemas need no services; the API's context is provided all the same, as HttpApiBuilder does.
      const schema = member as Schema.Schema<unknown, unknown>
      const encode = Schema.encodeUnknown(schema)
      return {
        is: Schema.is(schema),
        status: HttpApiSchema.getStatusErrorAST(schema.ast),
        encode: (error) => Effect.provide(encode(error), context)
      }
    })
  declaredByApi.set(api, declared)
  return declared
}

/** The answer to `error` when the API being served declares it: its schema's encoding and status. */
const declaredAnswer = (error: unknown): Effect.Effect<Option.Option<HttpServerResponse.HttpServerResponse>> =>
  Effect.flatMap(Effect.serviceOption(HttpApi.Api), (api) => {
    const declared = Option.isSome(api) ? declaredErrors(api.value).find((d) => d.is(error)) : undefined
    if (declared === undefined) return Effect.succeedNone
    return declared.encode(error).pipe(
      Effect.map((body) => Option.some(json(declared.status, body))),
      Effect.orElseSucceed(() => Option.none())
    )
  })

/** The answer to refused input: the route's own shape when it has one (see Messages.refusedInput), else 400. */
const refusal = (request: HttpServerRequest.HttpServerRequest, sentence: string, messages: Messages) =>
  Option.getOrElse(
    messages.refusedInput === undefined ? Option.none() : messages.refusedInput(request, sentence),
    () => badRequest(sentence)
  )

/** The answer to a body over `MAX_BODY_BYTES`: the route's own shape when it has one, else `tooLarge`; the connection closes. */
const tooLargeFor = (request: HttpServerRequest.HttpServerRequest, messages: Messages) =>
  Option.match(messages.refusedInput === undefined ? Option.none() : messages.refusedInput(request, TOO_LARGE), {
    onNone: () => tooLarge,
    onSome: (answer) => HttpServerResponse.setHeader(answer, "connection", "close")
  })

/** The Error-object response for `cause`. */
export const toResponse = (
  cause: Cause.Cause<unknown>,
  request: HttpServerRequest.HttpServerRequest,
  messages: Messages
): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
  const error = causeError(cause)
  // Refused input is answered by what the request declared; every other answer is the cause's alone.
  if (error instanceof BodyTooLarge) return Effect.succeed(tooLargeFor(request, messages))
  if (!isTag("HttpApiDecodeError")(error) && !isTag("RequestError")(error)) return answerCause(cause, messages)
  const hasBody = request.method !== "GET" && request.method !== "HEAD" && request.method !== "DELETE"
  const refuse = (sentence: string) => Effect.succeed(refusal(request, sentence, messages))
  if (isTag("HttpApiDecodeError")(error)) {
    // A request that sent nothing was read as `{}` (see EmptyBody): its 400 names the field, not the Content-Type.
    if (hasBody && !isJson(request) && !(messages.strict !== true && EmptyBody.sendsNothing(request))) return refuse(CONTENT_TYPE)
    const issues = (error as { issues: ReadonlyArray<DecodeIssue> }).issues
    return refuse(decodeMessage(issues, !hasBody))
  }
  const reason = (error as { cause?: unknown }).cause
  if (reason instanceof Error && reason.message === "maxBytes exceeded") return Effect.succeed(tooLargeFor(request, messages))
  if (!isJson(request)) return refuse(CONTENT_TYPE)
  return refuse(NOT_JSON)
}

/** The failure of `cause`, else its defect. */
const causeError = (cause: Cause.Cause<unknown>): unknown =>
  Option.getOrElse(Cause.failureOption(cause), () => Option.getOrUndefined(Cause.dieOption(cause)))

/**
 * The Error-object response for a `cause` that is no refused input (no decoding or body-reading
 * failure): what `toResponse` answers for it, for a path that reads no input through the platform.
 */
export const answerCause = (cause: Cause.Cause<unknown>, messages: Messages): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
  const error = causeError(cause)
  if (error instanceof Events.RateLimited) {
    return Effect.succeed(
      json(429, encodeRateLimited(error), { "retry-after": String(Math.max(1, Math.ceil(error.retryAfterSeconds))) })
    )
  }
  if (error instanceof Events.BadRequest) return Effect.succeed(json(400, encodeBadRequest(error)))
  if (error instanceof Events.Unauthorized) {
    return Effect.succeed(json(401, encodeUnauthorized(error), { "www-authenticate": "Bearer" }))
  }
  if (error instanceof Events.NotFound) return Effect.succeed(json(404, encodeNotFound(error)))
  if (error instanceof Events.Unavailable) return Effect.succeed(json(502, encodeUnavailable(error)))
  if (isTag("RouteNotFound")(error)) return Effect.succeed(json(404, encodeNotFound(new Events.NotFound({ error: messages.notFound }))))
  return Effect.flatMap(declaredAnswer(error), Option.match({
    onSome: Effect.succeed,
    onNone: () => undeclared(cause, error, messages.strict === true)
  }))
}

/** The strict answer to an interruption or an unexpected failure: the contract's 502. */
export const unreachable = json(
  502,
  encodeUnavailable(
    new Events.Unavailable({
      error: "The service failed before it could answer; retry reads later and check existing hooks before repeating a POST."
    })
  )
)

/** Interruptions, database failures and anything unexpected. */
const undeclared = (
  cause: Cause.Cause<unknown>,
  error: unknown,
  strict: boolean
): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
  if (Cause.isInterruptedOnly(cause)) {
    if (strict) return Effect.succeed(unreachable)
    return Effect.succeed(
      json(503, encodeUnavailable(new Events.Unavailable({ error: "The request was interrupted; retry it." })))
    )
  }
  if (isTag("SqlError")(error)) {
    return Effect.as(
      Effect.logWarning("Database unavailable", Cause.squash(cause)),
      json(502, encodeUnavailable(new Events.Unavailable({ error: "The service could not reach its database; retry later." })))
    )
  }
  return Effect.as(
    Effect.logError("Unexpected failure", cause),
    strict ? unreachable : json(500, { error: "The service failed unexpectedly; retry later." })
  )
}

/**
 * The request with a path the router can decode: a path that is not valid percent-encoding
 * (e.g. `%C0%AF`) is taken literally, so that its pair is still served (key first, then the handler).
 */
const literalPath = (request: HttpServerRequest.HttpServerRequest): HttpServerRequest.HttpServerRequest => {
  const query = request.url.indexOf("?")
  const path = query < 0 ? request.url : request.url.slice(0, query)
  try {
    decodeURIComponent(path)
    return request
  } catch {
    return request.modify({ url: path.replaceAll("%", "%25") + (query < 0 ? "" : request.url.slice(query)) })
  }
}

/**
 * The request with a body reader that reads to the end, keeping at most `MAX_BODY_BYTES`:
 * the platform's capped reader destroys the request past the cap, and with it the connection,
 * so a chunked body over the cap was never answered. Every body reader of the request uses it.
 */
const drainingBody = (request: HttpServerRequest.HttpServerRequest): HttpServerRequest.HttpServerRequest => {
  // Built on first use: most requests (GET, DELETE) never read a body.
  let text: Effect.Effect<string, HttpServerError.RequestError> | undefined
  const read = () => Effect.runSync(Effect.cached(
    Stream.runFold(request.stream, { chunks: [] as Array<Uint8Array>, bytes: 0 }, (read, chunk) => {
      read.bytes += chunk.length
      if (read.bytes <= MAX_BODY_BYTES) read.chunks.push(chunk)
      return read
    }).pipe(
      Effect.flatMap((read) =>
        read.bytes > MAX_BODY_BYTES
          ? Effect.fail(new HttpServerError.RequestError({ request, reason: "Decode", cause: new Error("maxBytes exceeded") }))
          : Effect.succeed(Buffer.concat(read.chunks).toString("utf8"))
      )
    )
  ))
  // The platform's `json`, `urlParamsBody` and `unsafeText` read `this.text`: they see this one.
  return Object.create(request, { text: { get: () => (text ??= read()) } }) as HttpServerRequest.HttpServerRequest
}

/** The strict API's request: a path the router can decode and, when it carries a body, the draining body reader. */
const strictRequest = (request: HttpServerRequest.HttpServerRequest): HttpServerRequest.HttpServerRequest => {
  const literal = literalPath(request)
  // Without a body there is nothing to read: the request stays as Node gave it (most GET and DELETE).
  return hasBody(request) ? drainingBody(literal) : literal
}

/**
 * Turns every failure and defect of the API into the Error object, and caps
 * request bodies at `MAX_BODY_BYTES`. Provide it to `HttpApiBuilder.serve`.
 */
export const layer = (messages: Messages): Layer.Layer<never> =>
  HttpApiBuilder.middleware((app: HttpApp.Default) => {
    const maxBodySize = Option.some(FileSystem.Size(MAX_BODY_BYTES))
    const capped = Effect.provideService(app, HttpIncomingMessage.MaxBodySize, maxBodySize)
    // Strict: the cap and the request's body reader in one provide (one context copy per request, not two).
    const cappedWith = (request: HttpServerRequest.HttpServerRequest) =>
      Effect.mapInputContext(app, (context: Context.Context<never>) =>
        Context.add(Context.add(context, HttpIncomingMessage.MaxBodySize, maxBodySize), HttpServerRequest.HttpServerRequest, request))
    const notFound = json(404, encodeNotFound(new Events.NotFound({ error: messages.notFound })))
    return Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
      if (messages.serves !== undefined && !messages.serves(request.method, request.url)) return Effect.succeed(notFound)
      // A declared oversize body is answered 413 before any router (HttpConnections); behind another
      // edge, here. Strict: the API reads a body only after the key (guardJsonBody), so a chunked one over
      // the cap is refused then; otherwise when its route reads it.
      if (messages.strict !== true && declaresTooLarge(request)) return Effect.succeed(tooLargeFor(request, messages))
      // A body is read to the end (kept up to the cap): the platform's capped reader would reset the connection.
      const strict = messages.strict === true
        ? strictRequest(request)
        : hasBody(request)
        ? drainingBody(request)
        : EmptyBody.orEmptyObject(request)
      const app = strict === request ? capped : cappedWith(strict)
      const answer = Effect.catchAllCause(app, (cause) => toResponse(cause, request, messages))
      // Strict: even a defect of the answer itself is the contract's 502, not the server's bare 500.
      return messages.strict === true
        ? Effect.catchAllCause(answer, (cause) => Effect.as(Effect.logError("Unexpected failure", cause), unreachable))
        : answer
    })
  })
