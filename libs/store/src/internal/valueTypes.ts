/**
 * One table of PostgreSQL text-format parsers, used by both drivers, so the
 * same query returns the same JavaScript values on PostgreSQL (node-postgres)
 * and on PGlite:
 *
 * | PostgreSQL type            | JavaScript value                                   |
 * |----------------------------|----------------------------------------------------|
 * | bool                       | boolean                                            |
 * | int2, int4, oid            | number                                             |
 * | float4, float8             | number                                             |
 * | int8 (bigint), numeric     | string (lossless; decode with Schema.BigInt etc.)  |
 * | text, varchar, uuid, ...   | string                                             |
 * | json, jsonb                | parsed JSON                                        |
 * | bytea                      | Buffer                                             |
 * | timestamptz                | Date                                               |
 * | date, timestamp, interval  | string, exactly as PostgreSQL prints it            |
 * | arrays of the above        | arrays of the above                                |
 *
 * Anything else arrives as PostgreSQL's text.
 */

/** Parses one text-format value of a PostgreSQL type. */
export type Parser = (text: string) => unknown

const identity: Parser = (text) => text
const parseBool: Parser = (text) => text === "t" || text === "true"
const parseInt10: Parser = (text) => Number.parseInt(text, 10)
const parseFloat_: Parser = (text) => Number.parseFloat(text)
const parseJson: Parser = (text) => JSON.parse(text)
const parseBytea: Parser = (text) =>
  text.startsWith("\\x") ? Buffer.from(text.slice(2), "hex") : Buffer.from(unescapeBytea(text), "latin1")

/** The pre-9.0 "escape" bytea output; only seen when bytea_output is changed. */
const unescapeBytea = (text: string): string =>
  text.replace(/\\(\\|[0-7]{3})/g, (_, code: string) => code === "\\" ? "\\" : String.fromCharCode(Number.parseInt(code, 8)))

const TIMESTAMPTZ = /^(\d{4,})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?(?:([+-])(\d{2})(?::?(\d{2}))?(?::(\d{2}))?|Z)?( BC)?$/

/**
 * timestamptz in PostgreSQL's ISO output ("2024-01-02 03:04:05.678+00",
 * "... +05:30", "... BC"); `infinity` becomes an invalid Date.
 */
const parseTimestamptz: Parser = (text) => {
  const m = TIMESTAMPTZ.exec(text)
  if (m === null) return new Date(Number.NaN)
  let year = Number(m[1])
  if (m[12] !== undefined) year = 1 - year
  const millis = m[7] === undefined ? 0 : Number(m[7].padEnd(3, "0").slice(0, 3))
  const date = new Date(0)
  // setUTCFullYear, unlike Date.UTC, keeps years 0..99 as they are.
  date.setUTCFullYear(year, Number(m[2]) - 1, Number(m[3]))
  date.setUTCHours(Number(m[4]), Number(m[5]), Number(m[6]), millis)
  const sign = m[8] === "-" ? -1 : 1
  const offsetSeconds = m[9] === undefined ? 0 : Number(m[9]) * 3600 + Number(m[10] ?? 0) * 60 + Number(m[11] ?? 0)
  return new Date(date.getTime() - sign * offsetSeconds * 1000)
}

/** Parses a PostgreSQL array literal ("{a,"b c",NULL}"), nested arrays included. */
export const parseArray = (text: string, element: Parser): unknown => {
  let i = 0
  // A leading dimension decoration ("[0:1]={...}") is skipped.
  if (text.startsWith("[")) i = text.indexOf("=") + 1
  const parseLevel = (): Array<unknown> => {
    const out: Array<unknown> = []
    i++ // "{"
    while (i < text.length) {
      const c = text[i]
      if (c === "}") {
        i++
        return out
      }
      if (c === ",") {
        i++
        continue
      }
      if (c === "{") {
        out.push(parseLevel())
        continue
      }
      if (c === "\"") {
        let value = ""
        i++
        while (i < text.length && text[i] !== "\"") {
          if (text[i] === "\\") i++
          value += text[i]
          i++
        }
        i++
        out.push(element(value))
        continue
      }
      let end = i
      while (end < text.length && text[end] !== "," && text[end] !== "}") end++
      const raw = text.slice(i, end)
      out.push(raw === "NULL" ? null : element(raw))
      i = end
    }
    return out
  }
  return parseLevel()
}

const scalarParsers: ReadonlyArray<readonly [oid: number, arrayOid: number, parser: Parser]> = [
  [16, 1000, parseBool],
  [17, 1001, parseBytea],
  [20, 1016, identity], // int8
  [21, 1005, parseInt10],
  [23, 1007, parseInt10],
  [26, 1028, parseInt10],
  [25, 1009, identity],
  [1043, 1015, identity],
  [1042, 1014, identity],
  [700, 1021, parseFloat_],
  [701, 1022, parseFloat_],
  [1700, 1231, identity], // numeric
  [114, 199, parseJson],
  [3802, 3807, parseJson],
  [1082, 1182, identity], // date
  [1114, 1115, identity], // timestamp without time zone
  [1184, 1185, parseTimestamptz],
  [1186, 1187, identity], // interval
  [2950, 2951, identity] // uuid
]

const parsers = new Map<number, Parser>()
for (const [oid, arrayOid, parser] of scalarParsers) {
  parsers.set(oid, parser)
  parsers.set(arrayOid, (text) => parseArray(text, parser))
}

/** The parser for a type oid: one of the table above, or the text itself. */
export const parserFor = (oid: number): Parser => parsers.get(oid) ?? identity

/**
 * node-postgres `types` option: text results go through `parserFor`; binary
 * results (never requested by @effect/sql-pg) stay Buffers.
 */
export const pgTypes = {
  getTypeParser: (oid: number, format?: "text" | "binary") =>
    format === "binary" ? (value: Buffer) => value : parserFor(oid)
}

/**
 * Prepares a query parameter for PGlite the way node-postgres does before it
 * sends one: objects become JSON text, bigints decimal text, byte views bytes.
 */
export const prepareValue = (value: unknown): unknown => {
  if (value === null || value === undefined) return null
  if (typeof value === "bigint") return value.toString()
  if (typeof value !== "object") return value
  if (value instanceof Date || Array.isArray(value)) return value
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength)
  return JSON.stringify(value)
}
