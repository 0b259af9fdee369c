/**
 * Structured logs: one flat JSON object per line, at LOG_LEVEL and above —
 * `time`, `level`, `msg`, then the annotations as fields, then `trace_id` and
 * `span_id` when the line is written inside a span, and `error` when it
 * carries a cause. No fiber ids, no log spans. The server logs to stdout; CLI
 * commands log to stderr so their stdout carries only the command's output.
 */
import { Cause, Context, FiberRef, FiberRefs, HashMap, HashSet, Inspectable, Layer, Logger, LogLevel, Option, Redacted, Tracer } from "effect"

/** Where finished lines go (one call per line, without the newline). */
export type Sink = (line: string) => void

/** Fields a line always has, in this order; annotations never overwrite them. */
const reserved = new Set(["time", "level", "msg", "trace_id", "span_id", "error"])

/** JSON of one annotation or message part: errors by name and message, secrets never. */
const plain = (value: unknown): unknown => {
  if (Redacted.isRedacted(value)) return "<redacted>"
  if (typeof value === "bigint") return value.toString()
  if (value instanceof Error) return { name: value.name, message: value.message }
  if (value instanceof Date) return value.toISOString()
  return Inspectable.toJSON(value)
}

const text = (value: unknown): string => (typeof value === "string" ? value : JSON.stringify(plain(value)) ?? String(value))

/** The line of one log record. */
export const format: Logger.Logger<unknown, string> = Logger.make(({ annotations, cause, context, date, logLevel, message }) => {
  const parts = Array.isArray(message) ? message : [message]
  const line: Record<string, unknown> = {
    time: date.toISOString(),
    level: logLevel.label.toLowerCase(),
    msg: parts.length === 0 ? "" : text(parts[0])
  }
  if (parts.length > 1) line["details"] = parts.slice(1).map(plain)
  for (const [key, value] of HashMap.toEntries(annotations)) {
    if (!reserved.has(key)) line[key] = plain(value)
  }
  const span = Context.getOption(FiberRefs.getOrDefault(context, FiberRef.currentContext), Tracer.ParentSpan)
  if (Option.isSome(span)) {
    line["trace_id"] = span.value.traceId
    line["span_id"] = span.value.spanId
  }
  if (!Cause.isEmpty(cause)) line["error"] = Cause.pretty(cause, { renderErrorCause: true })
  return JSON.stringify(line, (_key, value) => (typeof value === "bigint" ? value.toString() : value))
})

const writeTo = (stream: NodeJS.WriteStream): Sink => (line) => {
  stream.write(`${line}\n`)
}

/** JSON lines at `level` and above to `target` (stdout, stderr or a sink of its own), replacing every other logger. */
export const layer = (level: LogLevel.LogLevel, target: "stdout" | "stderr" | Sink): Layer.Layer<never> => {
  const sink = target === "stdout" ? writeTo(process.stdout) : target === "stderr" ? writeTo(process.stderr) : target
  return Layer.merge(
    Layer.locallyScoped(FiberRef.currentLoggers, HashSet.make(Logger.map(format, sink))),
    Logger.minimumLogLevel(level)
  )
}

/** Until the configuration is read: JSON on stderr at Info. */
export const bootstrap: Layer.Layer<never> = layer(LogLevel.Info, "stderr")
