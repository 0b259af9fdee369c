/**
 * The HTTP/1.1 connection rules of our Node servers, below any router:
 * pipelined requests of one connection are handled one after another, in
 * order (Node parses them all at once and would run their handlers side by
 * side, so two DELETEs of one subscription could race); bytes that are not
 * HTTP, an `Expect` Node does not know, a missing Host and CONNECT are
 * answered with the Error object instead of Node's bare 400/408/417/431 or
 * a dropped connection. An absolute-form target is served as its origin-form
 * (see RequestTarget). A body declared over `MAX_BODY_BYTES` is answered 413
 * at once, before any router, on every path, and the connection closed with
 * a lingering close (see LingeringClose) so that the client reads the answer.
 */
import { type HttpApp, HttpServerRequest } from "@effect/platform"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import { ErrorResponses } from "@crm-relay/events"
import { Effect, Option } from "effect"
import * as Http from "node:http"
import type { Socket } from "node:net"
import type { Duplex } from "node:stream"
import * as LingeringClose from "./LingeringClose.js"
import * as RequestTarget from "./RequestTarget.js"

/** Node options of a server these rules apply to: a missing Host is answered by the rules, with the Error object. */
export const serverOptions: Http.ServerOptions = { requireHostHeader: false }

/**
 * Answers a request itself (true) before any listener sees it, or leaves it to them (false).
 * `queued`: an earlier request of the same connection is not answered yet (pipelining).
 */
export type Shortcut = (request: Http.IncomingMessage, response: Http.ServerResponse, queued: boolean) => boolean

/**
 * A Node HTTP server whose requests these rules see before any listener:
 * they keep each connection's order, and may answer a request at once
 * (`install`'s shortcut) so that no listener, router or fiber runs for it.
 */
export class Server extends Http.Server {
  /** Set by `install`: answers a request itself (true), or leaves it to the listeners (false). */
  first: ((request: Http.IncomingMessage, response: Http.ServerResponse) => boolean) | undefined = undefined

  override emit(event: string, ...args: Array<unknown>): boolean {
    if (event === "request" && this.first !== undefined && this.first(args[0] as Http.IncomingMessage, args[1] as Http.ServerResponse)) {
      return true
    }
    return super.emit(event, ...args)
  }
}

const answered = (response: Http.ServerResponse): boolean => response.writableFinished || response.destroyed

/** Calls `then` once `response` is written or its connection is gone. */
const whenAnswered = (response: Http.ServerResponse, then: () => void): void => {
  if (answered(response)) return then()
  let called = false
  const once = () => {
    if (called) return
    called = true
    then()
  }
  response.once("finish", once)
  response.once("close", once)
}

const MALFORMED: Record<string, string> = {
  HPE_HEADER_OVERFLOW: "The request head is larger than the server accepts.",
  ERR_HTTP_REQUEST_TIMEOUT: "The request did not arrive in time.",
  HPE_HEADERS_TIMEOUT: "The request did not arrive in time."
}

/**
 * The answer to a body over the cap, when a route answers refused input in a shape of its own (the
 * in-call routes, `sentence` as the message); none for the 413 with the Error object.
 */
export type TooLarge = (method: string, url: string, sentence: string) => Option.Option<unknown>

/** Answers `response` for a body over the cap (`tooLarge`'s shape or 413 with the Error object), closing its connection. */
const answerTooLarge = (request: Http.IncomingMessage, response: Http.ServerResponse, tooLarge: TooLarge | undefined): void => {
  const own = tooLarge === undefined
    ? Option.none()
    : tooLarge(request.method ?? "", request.url ?? "", ErrorResponses.TOO_LARGE)
  const body = JSON.stringify(Option.getOrElse(own, () => ({ error: ErrorResponses.TOO_LARGE })))
  response.writeHead(Option.isSome(own) ? 200 : 413, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
    connection: "close"
  })
  response.end(body)
}

/** A complete raw answer with the Error object; the connection closes after it. */
export const rawAnswer = (status: 400 | 404, error: string): string => {
  const body = JSON.stringify({ error })
  return `HTTP/1.1 ${status} ${status === 400 ? "Bad Request" : "Not Found"}\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
}

/**
 * Installs the rules on `server` (before anything else listens to its requests) and
 * answers the middleware that keeps each connection's requests in order.
 */
export const install = (
  server: Server,
  notFound: string,
  options: {
    /** Told of each request closed for arriving too late: its head, or the rest of it. */
    readonly onTimeout?: ((phase: "head" | "request") => void) | undefined
    /** Answers some requests at once, before any router (the public port's refused addresses). */
    readonly shortcut?: Shortcut | undefined
    /** The answer to a body over the cap on routes with a shape of their own; 413 with the Error object elsewhere. */
    readonly tooLarge?: TooLarge | undefined
  } = {}
): (app: HttpApp.Default) => HttpApp.Default => {
  const { onTimeout, shortcut, tooLarge } = options
  // The latest response of each connection, and for each request the response it must wait for.
  const latest = new WeakMap<Duplex, Http.ServerResponse>()
  const predecessor = new WeakMap<Http.IncomingMessage, Http.ServerResponse>()
  // Requests whose absolute-form target cannot be served, with the 400's sentence.
  const invalidTarget = new WeakMap<Http.IncomingMessage, string>()

  server.first = (request, response) => {
    // Rewritten before anything reads it: shortcuts, router, span, access line and metrics see the origin-form.
    const target = RequestTarget.read(request.url ?? "")
    if (target._tag === "Absolute") {
      request.url = target.originForm
      // RFC 9112 §3.2: an HTTP/1.1 request without Host stays a 400, whatever its target.
      if (request.headers.host !== undefined || request.httpVersion !== "1.1") request.headers.host = target.authority
    } else if (target._tag === "Invalid") {
      invalidTarget.set(request, target.error)
    }
    const previous = latest.get(request.socket)
    const queued = previous !== undefined && !answered(previous)
    if (queued) predecessor.set(request, previous)
    latest.set(request.socket, response)
    // Before any shortcut or router, whatever the path: the body is never read (Node discards it as it comes).
    if (ErrorResponses.declaresTooLarge(request)) {
      answerTooLarge(request, response, tooLarge)
      return true
    }
    // Node writes the responses of one connection in request order, so an early answer waits its turn.
    return shortcut !== undefined && shortcut(request, response, queued)
  }

  LingeringClose.install(server, (socket) => latest.get(socket)?.req)

  // A body over the cap is refused before the client sends it: no 100 Continue, the 413 at once.
  server.on("checkContinue", (request: Http.IncomingMessage, response: Http.ServerResponse) => {
    if (!ErrorResponses.declaresTooLarge(request)) response.writeContinue()
    server.emit("request", request, response)
  })

  // An expectation Node does not know would be a bare 417: serve the request as if it had none.
  server.on("checkExpectation", (request: Http.IncomingMessage, response: Http.ServerResponse) => {
    server.emit("request", request, response)
  })

  server.on("clientError", (error: NodeJS.ErrnoException, socket: Duplex) => {
    if (error.code === "ECONNRESET" || !socket.writable) return void socket.destroy()
    const sentence = MALFORMED[error.code ?? ""] ?? "The request is not valid HTTP/1.1."
    const answer = () => {
      if (!socket.writable) return void socket.destroy()
      socket.end(rawAnswer(400, sentence), () => socket.destroy())
    }
    const previous = latest.get(socket)
    const timedOut = error.code === "ERR_HTTP_REQUEST_TIMEOUT" || error.code === "HPE_HEADERS_TIMEOUT"
    if (timedOut && (socket as Socket).bytesRead === 0) {
      // A connection that never sent a byte is closed without an answer, whichever deadline
      // noticed first: Node's periodic check, or the silent-connection timer.
      onTimeout?.("head")
      return void socket.destroy()
    }
    if (timedOut && previous !== undefined && !answered(previous)) {
      // The late part is the body of the request being handled: it is answered, and its handler
      // (still reading the body) finds the response written and the connection gone.
      onTimeout?.("request")
      if (previous.headersSent) return void socket.destroy()
      const body = JSON.stringify({ error: sentence })
      previous.writeHead(400, { "content-type": "application/json", "content-length": Buffer.byteLength(body), connection: "close" })
      return void previous.end(body, () => socket.destroy())
    }
    if (timedOut) onTimeout?.("head")
    // Answers to the well-formed requests before it on this connection go first.
    if (previous === undefined) answer()
    else whenAnswered(previous, answer)
  })

  // CONNECT is no method of ours: without a listener Node would drop the connection unanswered.
  server.on("connect", (_request: Http.IncomingMessage, socket: Duplex) => {
    socket.end(rawAnswer(404, notFound), () => socket.destroy())
  })

  const missingHost = ErrorResponses.badRequest("The request has no Host header.")

  return (app) =>
    Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
      const incoming = NodeHttpServerRequest.toIncomingMessage(request)
      const invalid = invalidTarget.get(incoming)
      const handle = incoming.httpVersion === "1.1" && incoming.headers.host === undefined
        ? Effect.succeed(missingHost)
        : invalid !== undefined
        ? Effect.succeed(ErrorResponses.badRequest(invalid))
        : app
      const previous = predecessor.get(incoming)
      if (previous === undefined) return handle
      predecessor.delete(incoming)
      return Effect.zipRight(Effect.async<void>((resume) => whenAnswered(previous, () => resume(Effect.void))), handle)
    })
}
