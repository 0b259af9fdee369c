/**
 * Structured logs: one JSON object per line, at LOG_LEVEL and above. The
 * server logs to stdout; CLI commands log to stderr so their stdout carries
 * only the command's output (e.g. `--json`).
 */
import { FiberRef, HashSet, Layer, Logger, LogLevel } from "effect"

/** JSON logs at `level` and above, to stdout or stderr, replacing every other logger. */
export const layer = (level: LogLevel.LogLevel, target: "stdout" | "stderr"): Layer.Layer<never> =>
  Layer.merge(
    Layer.locallyScoped(
      FiberRef.currentLoggers,
      HashSet.make(target === "stdout" ? Logger.withConsoleLog(Logger.jsonLogger) : Logger.withConsoleError(Logger.jsonLogger))
    ),
    Logger.minimumLogLevel(level)
  )

/** Until the configuration is read: JSON on stderr at Info. */
export const bootstrap: Layer.Layer<never> = layer(LogLevel.Info, "stderr")
