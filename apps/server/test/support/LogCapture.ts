/**
 * The server's log stream, captured: the JSON lines `Logging.layer` writes,
 * parsed, for tests that assert their shape.
 */
import { Effect, Layer, LogLevel } from "effect"
import * as Logging from "../../src/observability/Logging.js"

/** The captured lines, raw and parsed. */
export interface LogCapture {
  readonly raw: Array<string>
  readonly lines: () => ReadonlyArray<Record<string, unknown>>
  /** Logs at `level` and above into this capture (build it before the server, so the server's fibers use it). */
  readonly layer: Layer.Layer<never>
}

/** A new capture. */
export const make = (level: LogLevel.LogLevel = LogLevel.Info): LogCapture => {
  const raw: Array<string> = []
  return {
    raw,
    lines: () => raw.map((line) => JSON.parse(line) as Record<string, unknown>),
    layer: Logging.layer(level, (line) => raw.push(line))
  }
}

/** The lines with `log: kind` (access, audit). */
export const ofKind = (capture: LogCapture, kind: string) =>
  Effect.sync(() => capture.lines().filter((line) => line["log"] === kind))
