/**
 * Generated requests against a public Event API port, and the checks every
 * answer must pass: a contract status (201, 204, 400, 401, 404, 429, 502 and
 * the 200 of GET /perform-list, and HTTP's 413 for a body over the cap, which
 * closes the connection), the Error object on every error, and an
 * oracle for the three pairs (valid key and body give 201, and so on).
 * Deterministic from a seed: the same seed sends the same bytes.
 *
 * Requests go pipelined over keep-alive connections (a batch per connection),
 * malformed HTTP on connections of its own. Each integration key is used at
 * most `USES_PER_KEY` times, so the per-key limit answers 429 only where a
 * case asks for it.
 */
import * as RawHttp from "./RawHttp.js"

/** Uses of one key by generated requests (below the 60 per minute limit). */
export const USES_PER_KEY = 50

const NOT_FOUND = "Not found: the Event API serves POST /subscribe, DELETE /subscribe/{id} and GET /perform-list."
const UNAUTHORIZED = "The integration key is missing, invalid or disabled."
const CONTRACT_STATUSES = new Set([200, 201, 204, 400, 401, 404, 413, 429, 502])
const TOO_LARGE = "The request body is larger than 65536 bytes, the most this server accepts; send a body of at most 65536 bytes."
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
const MAX_BODY_BYTES = 64 * 1024
const MAX_DEPTH = 32
const MAX_EVENT_BYTES = 1024
/** How long a connection may stay silent before it counts as hung: generous, for a loaded machine. */
const HANG = 120_000

/** A seeded generator (mulberry32): numbers in [0, 1). */
export const random = (seed: number) => {
  let state = seed >>> 0
  const next = () => {
    state = (state + 0x6D2B79F5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const int = (below: number) => Math.floor(next() * below)
  const pick = <A>(items: ReadonlyArray<A>): A => items[int(items.length)]!
  const chance = (p: number) => next() < p
  return { next, int, pick, chance }
}
type Random = ReturnType<typeof random>

/** What a request expects: an exact status, or one of several when the oracle cannot tell. */
type Expected = { readonly statuses: ReadonlyArray<number>; readonly error?: string }

/** One well-formed request and what it must get. */
interface Request {
  readonly bytes: Buffer
  readonly describe: string
  readonly head: boolean
  readonly expected: Expected
  /** GET /perform-list with a valid key: the 200 is an array. */
  readonly list: boolean
  /** Closes its connection: it sends `Connection: close` (only ever the last of a batch), or is answered 413. */
  readonly closes: boolean
}

/** What is sent on one connection. */
export type Case =
  | { readonly _tag: "Batch"; readonly requests: ReadonlyArray<Request>; readonly malformed?: string | undefined }
  | { readonly _tag: "Malformed"; readonly name: string; readonly bytes: Buffer; readonly statuses: ReadonlyArray<number> }
  | { readonly _tag: "Lifecycle"; readonly key: string }
  | { readonly _tag: "Burst"; readonly key: string }

// --- values ------------------------------------------------------------------

const STRINGS = [
  "", "https://hooks.example.com/lead", "http://127.0.0.1:1/x", "lead", "booking", "all", "LEAD", "x",
  "\u0000", "a\u0000b", "\ud800", "\udc00x", "\u{1F600}", "é", "\\", "\"", "\n\t", "<script>", "%00", "' OR 1=1 --",
  "https://r/" + "[".repeat(40), "{}", "null"
]

const jsonString = (r: Random): string => {
  if (r.chance(0.1)) return "s".repeat(r.int(3000))
  if (r.chance(0.6)) return r.pick(STRINGS)
  return Array.from({ length: r.int(12) }, () => String.fromCharCode(r.chance(0.9) ? 32 + r.int(95) : r.int(0x10000))).join("")
}

const jsonNumber = (r: Random): number => r.pick([0, -0, 1, -1, 3, 20, 21, 2.5, 1e308, -1e-308, Number.MAX_SAFE_INTEGER, r.int(1000)])

/** A JSON value of every type, `depth` levels at most. */
const jsonValue = (r: Random, depth: number): unknown => {
  const kind = depth <= 0 ? r.int(4) : r.int(6)
  switch (kind) {
    case 0: return null
    case 1: return r.chance(0.5)
    case 2: return jsonNumber(r)
    case 3: return jsonString(r)
    case 4: return Array.from({ length: r.int(5) }, () => jsonValue(r, depth - 1))
    default: return Object.fromEntries(Array.from({ length: r.int(5) }, () => [jsonString(r).slice(0, 20), jsonValue(r, depth - 1)]))
  }
}

/** The body of a POST: subscribe-shaped objects, every JSON type and depth, and text that is not JSON. */
const body = (r: Random): string => {
  switch (r.int(10)) {
    case 0:
    case 1:
    case 2: {
      const subscription: Record<string, unknown> = { targetUrl: r.chance(0.8) ? jsonString(r) : jsonValue(r, 2) }
      if (r.chance(0.5)) subscription["event"] = r.chance(0.8) ? jsonString(r) : jsonValue(r, 1)
      if (r.chance(0.2)) subscription["extra"] = jsonValue(r, 3)
      if (r.chance(0.1)) delete subscription["targetUrl"]
      return JSON.stringify(subscription)
    }
    case 3: return JSON.stringify(jsonValue(r, 4))
    case 4: {
      // Deep: a nest around a subscription, or bare brackets.
      const n = r.pick([MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 100, 5000, 20_000])
      return r.chance(0.5)
        ? `{"targetUrl":"https://r","x":${"[".repeat(n)}${"]".repeat(n)}}`
        : `${"{\"a\":".repeat(n)}1${"}".repeat(n)}`
    }
    case 5: {
      // Large: a long array, a wide object, or a body over the cap.
      const n = r.pick([1000, 10_000, 20_000])
      if (r.chance(0.4)) return JSON.stringify(Array.from({ length: n }, (_, i) => i))
      if (r.chance(0.5)) return JSON.stringify(Object.fromEntries([["targetUrl", "https://r"], ...Array.from({ length: n / 10 }, (_, i) => [`k${i}`, i])]))
      return JSON.stringify({ targetUrl: "https://r", pad: "p".repeat(MAX_BODY_BYTES) })
    }
    case 6: return r.pick(["", "{", "{\"targetUrl\":", "[1,]", "{'targetUrl':'x'}", "nul", "\"\\ud800\"", "{\"targetUrl\":\"a\"}x", "\u0000", "{\"targetUrl\":\"https://r\"}\n"])
    case 7: return r.pick(["--b\r\nContent-Disposition: form-data; name=\"targetUrl\"\r\n\r\nhttps://r\r\n--b--\r\n", "targetUrl=https%3A%2F%2Fr", ""])
    default: return JSON.stringify({ targetUrl: `https://hooks.example.com/${r.int(1e6)}`, event: r.pick(["lead", "booking", "all"]) })
  }
}

const depthOver = (text: string): boolean => {
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text[i]
    if (inString) {
      if (c === "\\") i++
      else if (c === "\"") inString = false
    } else if (c === "\"") inString = true
    else if (c === "[" || c === "{") {
      if (++depth > MAX_DEPTH) return true
    } else if (c === "]" || c === "}") depth--
  }
  return false
}

const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/

/** The status of POST /subscribe with a valid key. */
const subscribeStatus = (contentType: string | undefined, text: string): number => {
  const media = (contentType ?? "").split(";")[0]!.trim().toLowerCase()
  if (media !== "application/json") return 400
  // A chunked body is read (after the key) up to the cap: past it, 413.
  if (Buffer.byteLength(text) > MAX_BODY_BYTES) return 413
  if (depthOver(text)) return 400
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return 400
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return 400
  const { event, targetUrl } = parsed as { targetUrl?: unknown; event?: unknown }
  if (typeof targetUrl !== "string" || UNSTORABLE.test(targetUrl)) return 400
  if (event === undefined) return 201
  if (typeof event !== "string" || UNSTORABLE.test(event) || Buffer.byteLength(event) > MAX_EVENT_BYTES) return 400
  return 201
}

// --- requests ----------------------------------------------------------------

const SUBSCRIPTION = "0f8fad5b-d9cb-469f-a165-70867728950e"
const PATHS_SERVED = [["POST", "/subscribe"], ["DELETE", `/subscribe/${SUBSCRIPTION}`], ["GET", "/perform-list"]] as const
const LOOKALIKES = [
  "/SUBSCRIBE", "/Subscribe", "/subscribe/", "//subscribe", "/subscribe;x", `//subscribe/${SUBSCRIPTION}`,
  `/subscribe/${SUBSCRIPTION}/`, `/subscribe//${SUBSCRIPTION}`, `/subscribe/${SUBSCRIPTION};v=1`, "/Perform-List",
  "/perform-list;x", "/perform-list/", "//perform-list", "/", "*", "/v1/accounts", "/healthz", "/subscribe/a/b",
  "/perform-list/x", "/subscribe%2F", "/%73ubscribe", "/subscribe/../perform-list", "/perform-list#x"
]
/** Schemes and authorities of the absolute-form a client behind a forward proxy sends (RFC 9112 §3.2.2). */
const PROXY_ORIGINS = ["http://relay.test", "https://relay.test:8443", "HTTP://127.0.0.1:1", "http://[::1]", "Https://Example.COM:"]
const METHODS = ["GET", "POST", "DELETE", "HEAD", "PUT", "PATCH", "OPTIONS", "TRACE", "PROPFIND", "PURGE", "SEARCH"]

const LIMITS: ReadonlyArray<readonly [string, ReadonlyArray<number>]> = [
  ["", [200]], ["?limit=1", [200]], ["?limit=20", [200]], ["?limit=0", [200]], ["?limit=100", [200]], ["?limit=-7", [200]],
  ["?limit=%205%20", [200]], ["?limit=abc", [400]], ["?limit=2.5", [400]], ["?limit=", [400]], ["?limit=1&limit=2", [400]],
  ["?offset=3&since=x", [200]], ["?limit=3&x=%00", [200]], ["?%zz=1", [200, 400]], ["?limit=%00", [400]], ["?limit=1e3", [200, 400]],
  ["?limit=99999999999999999999", [200, 400]], ["?" + "q=1&".repeat(500), [200]]
]

const ids = (r: Random): string =>
  r.pick([SUBSCRIPTION, "not-a-uuid", "a".repeat(101), "x".repeat(3000), "%00", "%2F", "..", "%C0%AF", "0F8FAD5B-D9CB-469F-A165-70867728950E", String(r.int(1e9))])

const authorization = (r: Random, key: string): readonly [string | undefined, boolean] =>
  r.pick<readonly [string | undefined, boolean]>([
    [`Bearer ${key}`, true], [`Bearer ${key}`, true], [`bearer ${key}`, true], [`BEARER   ${key}  `, true],
    [undefined, false], [`Basic ${key}`, false], [`Bearer ${key}x`, false], ["Bearer", false], ["Bearer crk_unknown", false],
    [`Bearer ${key} ${key}`, false], [jsonString(r).replace(/[^\x20-\x7e]/g, ""), false]
  ])

const CONTENT_TYPES = [
  "application/json", "application/json; charset=utf-8", "Application/JSON", " application/json ", "application/json;x=y",
  "multipart/form-data; boundary=b", "multipart/form-data", "text/plain", "application/x-www-form-urlencoded",
  "application/jsonx", "application/problem+json", "*/*", "", "text/json"
]

/** Keys for generated requests: each one used at most `USES_PER_KEY` times. */
export class KeyRing {
  private used = 0
  constructor(readonly keys: ReadonlyArray<string>) {}
  /** The key for the next request; `counted` when it will pass the key check (and count against the limit). */
  next(counted: boolean): string {
    const index = Math.floor(this.used / USES_PER_KEY)
    if (counted) this.used++
    if (index >= this.keys.length) throw new Error(`Not enough integration keys: more than ${this.keys.length * USES_PER_KEY} uses`)
    return this.keys[index]!
  }
  /** A key for a case of its own (lifecycle, burst): not used by anything else. */
  whole(): string {
    const index = Math.ceil(this.used / USES_PER_KEY)
    this.used = (index + 1) * USES_PER_KEY
    if (index >= this.keys.length) throw new Error("Not enough integration keys")
    return this.keys[index]!
  }
  /** Keys needed for `requests` generated requests (a generous bound). */
  static needed(requests: number): number {
    return Math.ceil(requests / USES_PER_KEY) + Math.ceil(requests / 40) + 8
  }
}

const request = (r: Random, keys: KeyRing, last: boolean): Request => {
  const served = r.chance(0.75)
  const method = served ? "" : r.pick(METHODS)
  const [pairMethod, pairPath] = r.pick(PATHS_SERVED)
  const finalMethod = served ? pairMethod : method
  let target: string
  if (served && pairMethod === "DELETE") target = `/subscribe/${ids(r)}`
  else if (served && pairMethod === "GET") target = "/perform-list"
  else if (served) target = "/subscribe"
  else target = r.chance(0.6) ? r.pick(LOOKALIKES) : pairPath
  const limit = r.pick(LIMITS)
  if (finalMethod === "GET" && target === "/perform-list") target += limit[0]
  else if (r.chance(0.1)) target += r.pick(["?a=1", "?", "?limit=2", "?x=%00"])
  const isServed = (finalMethod === "POST" && /^\/subscribe(\?|$)/.test(target)) ||
    (finalMethod === "DELETE" && /^\/subscribe\/[^/;?#]+(\?|$)/.test(target)) ||
    (finalMethod === "GET" && /^\/perform-list(\?|$)/.test(target))
  // Served as its origin-form: the pairs and their near misses answer the same either way.
  if (target.startsWith("/") && r.chance(0.15)) target = r.pick(PROXY_ORIGINS) + target

  const headers: Array<readonly [string, string]> = [["Host", r.pick(["127.0.0.1", "example.com", "x:1", "[::1]"])]]
  // Whether the key passes is known before the key is taken: only then does it count.
  const [authHeader, valid] = authorization(r, "KEY")
  const key = keys.next(isServed && valid)
  if (authHeader !== undefined) headers.push(["Authorization", authHeader.replaceAll("KEY", key)])
  let text: string | undefined
  let contentType: string | undefined
  if (finalMethod === "POST" || r.chance(0.1)) {
    text = body(r)
    contentType = r.chance(0.7) ? r.pick(CONTENT_TYPES.slice(0, 5)) : r.pick(CONTENT_TYPES)
    if (contentType !== "" || r.chance(0.5)) headers.push(["Content-Type", contentType])
    else contentType = undefined
  }
  for (let i = r.int(4); i > 0; i--) {
    headers.push([r.pick(["X-Fuzz", "Accept", "Accept-Encoding", "Cookie", "X-Forwarded-For", "Origin", "If-None-Match", "Range"]), jsonString(r).replace(/[^\x20-\x7e]/g, "").trim()])
  }
  if (r.chance(0.05)) headers.push(["Expect", "100-continue"])
  const closes = last && r.chance(0.2)
  if (closes) headers.push(["Connection", "close"])
  const chunked = text !== undefined && r.chance(0.2)
  let bytes: Buffer
  if (text !== undefined && chunked) {
    // Chunked, in up to three chunks.
    const data = Buffer.from(text, "utf8")
    const cut = [0, r.int(data.length + 1), data.length].sort((a, b) => a - b)
    const chunks = [data.subarray(cut[0], cut[1]), data.subarray(cut[1], cut[2])].filter((c) => c.length > 0)
    const encoded = Buffer.concat([...chunks.flatMap((c) => [Buffer.from(`${c.length.toString(16)}\r\n`), c, Buffer.from("\r\n")]), Buffer.from("0\r\n\r\n")])
    bytes = RawHttp.format(finalMethod, target, [...headers, ["Transfer-Encoding", "chunked"]], encoded)
  } else {
    bytes = RawHttp.format(finalMethod, target, headers, text)
  }

  let expected: Expected
  let list = false
  // A length over the cap is answered 413 before anything else, whatever the path and key.
  if (!chunked && text !== undefined && Buffer.byteLength(text) > MAX_BODY_BYTES) expected = { statuses: [413], error: TOO_LARGE }
  else if (!isServed) expected = { statuses: [404], error: NOT_FOUND }
  else if (!valid) expected = { statuses: [401], error: UNAUTHORIZED }
  else if (finalMethod === "DELETE") expected = { statuses: [404] }
  else if (finalMethod === "GET") {
    expected = { statuses: limit[1] }
    list = true
  } else expected = { statuses: [subscribeStatus(contentType, text ?? "")] }
  const describe = `${finalMethod} ${target.slice(0, 80)} [${headers.map(([n]) => n).join(",")}] ${JSON.stringify((text ?? "").slice(0, 60))}`
  // A 413 closes the connection: nothing after it on the connection is answered.
  return { bytes, describe, head: finalMethod === "HEAD", expected, list, closes: closes || expected.statuses[0] === 413 }
}

/** Malformed or unusual HTTP: each is answered 400 with the Error object (or as noted), never dropped unanswered. */
export const MALFORMED: ReadonlyArray<readonly [string, string] | readonly [string, string, ReadonlyArray<number>]> = [
  ["bare LF", "GET /perform-list HTTP/1.1\nHost: x\n\n"],
  ["control byte in a header", "GET /perform-list HTTP/1.1\r\nHost: x\r\nX-Test: a\u0001b\r\n\r\n"],
  ["NUL in a header", "GET /perform-list HTTP/1.1\r\nHost: x\r\nX-Test: a\u0000b\r\n\r\n"],
  ["missing Host", "GET /perform-list HTTP/1.1\r\n\r\n"],
  ["Content-Length and Transfer-Encoding", "POST /subscribe HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"],
  ["two Content-Lengths", "POST /subscribe HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n{}{}{}"],
  ["negative Content-Length", "POST /subscribe HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n"],
  ["head over the limit", `GET /perform-list HTTP/1.1\r\nHost: x\r\nX-Pad: ${"p".repeat(20_000)}\r\n\r\n`],
  ["many headers", `GET /perform-list HTTP/1.1\r\nHost: x\r\n${"X-A: 1\r\n".repeat(3000)}\r\n`],
  ["invalid method", "G(T /perform-list HTTP/1.1\r\nHost: x\r\n\r\n"],
  ["lower-case method", "get /perform-list HTTP/1.1\r\nHost: x\r\n\r\n"],
  ["not HTTP", "\u0000\u0001\u0002 hello\r\n\r\n"],
  ["bad version", "GET /perform-list HTTP/7.5\r\nHost: x\r\n\r\n"],
  ["space in the target", "GET /perform list HTTP/1.1\r\nHost: x\r\n\r\n"],
  ["obsolete line folding", "GET /perform-list HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n folded\r\n\r\n"],
  ["invalid header name", "GET /perform-list HTTP/1.1\r\nHost: x\r\nX A: 1\r\n\r\n"],
  // A well-formed head is answered (401: no key) before its body turns out malformed.
  ["bad chunk size", "POST /subscribe HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n", [401, 400]],
  ["unknown Transfer-Encoding", "POST /subscribe HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", [401, 400]],
  ["CONNECT", "CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n", [404]],
  ["Upgrade", "GET /perform-list HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", [401]],
  ["HTTP/1.0 without Host", "GET /perform-list HTTP/1.0\r\n\r\n", [401]],
  ["absolute-form, not http(s)", "GET ftp://x/perform-list HTTP/1.1\r\nHost: x\r\n\r\n"],
  ["absolute-form with userinfo", "POST http://u:p@x/subscribe HTTP/1.1\r\nHost: x\r\n\r\n"],
  ["absolute-form without a host", "GET http:///perform-list HTTP/1.1\r\nHost: x\r\n\r\n"],
  ["absolute-form without Host", "GET http://x/perform-list HTTP/1.1\r\n\r\n"]
]

/** `count` generated requests (about) as cases, from `seed`. */
export const generate = (seed: number, count: number, keys: KeyRing): ReadonlyArray<Case> => {
  const r = random(seed)
  const cases: Array<Case> = []
  let requests = 0
  cases.push({ _tag: "Burst", key: keys.whole() })
  requests += 61
  while (requests < count) {
    const roll = r.next()
    if (roll < 0.08) {
      const [name, text, statuses] = r.pick(MALFORMED)
      cases.push({ _tag: "Malformed", name, bytes: Buffer.from(text, "latin1"), statuses: statuses ?? [400] })
      requests++
    } else if (roll < 0.11) {
      cases.push({ _tag: "Lifecycle", key: keys.whole() })
      requests += 4
    } else {
      const size = 1 + r.int(6)
      const batch = Array.from({ length: size }, (_, i) => request(r, keys, i === size - 1))
      // Nothing follows a request that closes the connection.
      const malformed = !batch[size - 1]!.closes && r.chance(0.05) ? r.pick(MALFORMED.filter((m) => m[2] === undefined))[1] : undefined
      cases.push({ _tag: "Batch", requests: batch, malformed })
      // A request that closes the connection is the last one answered on it.
      const closes = batch.findIndex((q) => q.closes)
      requests += closes >= 0 ? closes + 1 : size + (malformed === undefined ? 0 : 1)
    }
  }
  return cases
}

// --- checks ------------------------------------------------------------------

/** The outcome of a run. */
export interface Report {
  readonly seed: number
  readonly requests: number
  /** Answers by status ("closed" for a malformed request answered by closing). */
  readonly counts: Readonly<Record<string, number>>
  readonly violations: ReadonlyArray<string>
}

const checkAnswer = (answer: RawHttp.RawAnswer | undefined, what: string, expected: Expected, head: boolean, list: boolean): Array<string> => {
  if (answer === undefined) return [`${what}: no answer`]
  const problems: Array<string> = []
  const say = (problem: string) => problems.push(`${what}: ${problem} (got ${answer.status} ${answer.body.slice(0, 120)})`)
  if (!CONTRACT_STATUSES.has(answer.status)) say("status outside the contract")
  if (!expected.statuses.includes(answer.status)) say(`expected ${expected.statuses.join(" or ")}`)
  if (head) {
    if (answer.body !== "") say("an answer to HEAD with a body")
    return problems
  }
  if (answer.status === 204) {
    if (answer.body !== "") say("204 with a body")
  } else if (answer.status === 200) {
    if (!list) say("200 on a request that is not GET /perform-list")
    try {
      if (!Array.isArray(JSON.parse(answer.body))) say("200 without an array")
    } catch {
      say("200 without JSON")
    }
  } else if (answer.status === 201) {
    try {
      const parsed = JSON.parse(answer.body) as Record<string, unknown>
      if (Object.keys(parsed).join() !== "id" || typeof parsed["id"] !== "string" || !UUID.test(parsed["id"])) say("201 without {id}")
    } catch {
      say("201 without JSON")
    }
  } else {
    if (!(answer.headers["content-type"] ?? "").startsWith("application/json")) say("an error without a JSON Content-Type")
    try {
      const parsed = JSON.parse(answer.body) as Record<string, unknown>
      const keys = Object.keys(parsed).sort().join()
      const shape = answer.status === 429 ? "error,retryAfterSeconds" : "error"
      if (keys !== shape || typeof parsed["error"] !== "string") say("not the Error object")
      if (expected.error !== undefined && parsed["error"] !== expected.error) say(`expected the error ${JSON.stringify(expected.error)}`)
      if (answer.status === 429 && !/^\d+$/.test(answer.headers["retry-after"] ?? "")) say("429 without Retry-After")
    } catch {
      say("an error without the Error object")
    }
  }
  return problems
}

const format = (method: string, target: string, key: string, body?: string) =>
  RawHttp.format(method, target, [["Host", "x"], ["Authorization", `Bearer ${key}`], ...(body === undefined ? [] : [["Content-Type", "application/json"] as const])], body)

/** Sends one case and checks its answers; adds to `counts`. */
const runCase = async (port: number, c: Case, counts: Record<string, number>): Promise<Array<string>> => {
  const count = (status: number | string) => {
    counts[String(status)] = (counts[String(status)] ?? 0) + 1
  }
  const problems: Array<string> = []
  switch (c._tag) {
    case "Malformed": {
      const exchanged = await RawHttp.exchange(port, c.bytes, { expect: 1, timeoutMillis: HANG })
      if (exchanged.timedOut) return [`malformed ${c.name}: neither answered nor closed`]
      const answer = exchanged.answers[0]
      if (answer === undefined) {
        count("closed")
        return [`malformed ${c.name}: closed without an answer`]
      }
      count(answer.status)
      return checkAnswer(answer, `malformed ${c.name}`, { statuses: c.statuses }, false, false)
    }
    case "Batch": {
      const parts = c.requests.map((q) => q.bytes)
      if (c.malformed !== undefined) parts.push(Buffer.from(c.malformed, "latin1"))
      // One write: the requests arrive pipelined.
      const closes = c.requests.findIndex((q) => q.closes)
      const expect = closes >= 0 ? closes + 1 : c.requests.length + (c.malformed === undefined ? 0 : 1)
      const exchanged = await RawHttp.exchange(port, Buffer.concat(parts), {
        expect,
        timeoutMillis: HANG,
        noBody: c.requests.map((q) => q.head)
      })
      if (exchanged.timedOut) problems.push(`batch of ${c.requests.length}: timed out after ${exchanged.answers.length} answers: ${c.requests.map((q) => q.describe).join(" | ")}`)
      c.requests.forEach((q, i) => {
        if (closes >= 0 && i > closes) return
        const answer = exchanged.answers[i]
        if (answer !== undefined) count(answer.status)
        if (!exchanged.timedOut || answer !== undefined) problems.push(...checkAnswer(answer, q.describe, q.expected, q.head, q.list))
      })
      if (c.malformed !== undefined && closes < 0) {
        const answer = exchanged.answers[c.requests.length]
        if (answer === undefined) {
          count("closed")
          problems.push("malformed after a batch: closed without an answer")
        } else {
          count(answer.status)
          problems.push(...checkAnswer(answer, "malformed after a batch", { statuses: [400] }, false, false))
        }
      }
      return problems
    }
    case "Lifecycle": {
      const created = await RawHttp.exchange(port, format("POST", "/subscribe", c.key, JSON.stringify({ targetUrl: "https://hooks.example.com/l" })), { expect: 1, timeoutMillis: HANG })
      const first = created.answers[0]
      problems.push(...checkAnswer(first, "lifecycle POST", { statuses: [201] }, false, false))
      if (first?.status !== 201) return problems
      count(201)
      const id = (JSON.parse(first.body) as { id: string }).id
      const removed = await RawHttp.exchange(port, Buffer.concat([format("DELETE", `/subscribe/${id}`, c.key), format("DELETE", `/subscribe/${id}`, c.key), format("GET", "/perform-list", c.key)]), { expect: 3, timeoutMillis: HANG })
      const expected = [[204], [404], [200]] as const
      removed.answers.forEach((a) => count(a.status))
      expected.forEach((statuses, i) => problems.push(...checkAnswer(removed.answers[i], `lifecycle pipelined #${i + 1}`, { statuses }, false, i === 2)))
      return problems
    }
    case "Burst": {
      const all = Buffer.concat(Array.from({ length: 61 }, () => format("GET", "/perform-list", c.key)))
      const exchanged = await RawHttp.exchange(port, all, { expect: 61, timeoutMillis: HANG })
      exchanged.answers.forEach((a) => count(a.status))
      for (let i = 0; i < 61; i++) {
        // On a real clock the 61 requests may straddle two minutes: then the 61st passes too.
        problems.push(...checkAnswer(exchanged.answers[i], `burst #${i + 1}`, { statuses: i < 60 ? [200] : [429, 200] }, false, true))
      }
      return problems
    }
  }
}

/** Sends the cases of `seed` to the public port `port`, `concurrency` connections at a time, and checks every answer. */
export const run = async (options: {
  readonly port: number
  readonly seed: number
  readonly requests: number
  readonly keys: ReadonlyArray<string>
  readonly concurrency?: number
}): Promise<Report> => {
  const cases = generate(options.seed, options.requests, new KeyRing(options.keys))
  const counts: Record<string, number> = {}
  const violations: Array<string> = []
  let next = 0
  const worker = async () => {
    while (next < cases.length) {
      const c = cases[next++]!
      violations.push(...(await runCase(options.port, c, counts)))
    }
  }
  await Promise.all(Array.from({ length: options.concurrency ?? 8 }, worker))
  const requests = Object.values(counts).reduce((a, b) => a + b, 0)
  return { seed: options.seed, requests, counts, violations }
}

/** Whether the server still answers normally: subscribe, preview, unsubscribe with `key`. */
export const stillServes = async (port: number, key: string): Promise<Array<string>> => {
  const created = await RawHttp.exchange(port, format("POST", "/subscribe", key, JSON.stringify({ targetUrl: "https://hooks.example.com/after" })), { expect: 1, timeoutMillis: HANG })
  const problems = checkAnswer(created.answers[0], "after: POST", { statuses: [201] }, false, false)
  if (problems.length > 0) return problems
  const id = (JSON.parse(created.answers[0]!.body) as { id: string }).id
  const rest = await RawHttp.exchange(port, Buffer.concat([format("GET", "/perform-list", key), format("DELETE", `/subscribe/${id}`, key)]), { expect: 2, timeoutMillis: HANG })
  return [
    ...checkAnswer(rest.answers[0], "after: GET", { statuses: [200] }, false, true),
    ...checkAnswer(rest.answers[1], "after: DELETE", { statuses: [204] }, false, false)
  ]
}
