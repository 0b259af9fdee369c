/**
 * Prometheus text exposition (format 0.0.4) of Effect's metric snapshot: one
 * family per metric name (HELP from the description, TYPE from the key
 * type), one sample per label set; histograms with cumulative `le` buckets,
 * `_sum` and `_count`; summaries with `quantile`; frequencies as counters
 * with a `value` label.
 */
import { MetricKeyType, type MetricPair, MetricState, Option } from "effect"

/** The content type of the exposition. */
export const CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

const sanitize = (name: string): string => {
  const clean = name.replace(/[^a-zA-Z0-9_:]/g, "_")
  return /^[0-9]/.test(clean) ? `_${clean}` : clean
}
const escapeLabel = (value: string): string => value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, "\\\"")
const escapeHelp = (value: string): string => value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")

const number = (value: number | bigint): string => {
  if (typeof value === "bigint") return value.toString()
  if (Number.isNaN(value)) return "NaN"
  if (value === Number.POSITIVE_INFINITY) return "+Inf"
  if (value === Number.NEGATIVE_INFINITY) return "-Inf"
  return String(value)
}

type Labels = ReadonlyArray<readonly [string, string]>

const labels = (pairs: Labels): string =>
  pairs.length === 0 ? "" : `{${pairs.map(([key, value]) => `${sanitize(key)}="${escapeLabel(value)}"`).join(",")}}`

interface Family {
  readonly type: "counter" | "gauge" | "histogram" | "summary"
  help: string
  readonly lines: Array<string>
}

/** The exposition of `pairs` (e.g. `Metric.unsafeSnapshot()`), families sorted by name. */
export const serialize = (pairs: Iterable<MetricPair.MetricPair.Untyped>): string => {
  const families = new Map<string, Family>()
  const family = (name: string, type: Family["type"], help: string): Family => {
    let found = families.get(name)
    if (found === undefined) {
      found = { type, help, lines: [] }
      families.set(name, found)
    } else if (found.help === "") {
      found.help = help
    }
    return found
  }
  for (const { metricKey: key, metricState: state } of pairs) {
    const name = sanitize(key.name)
    const help = Option.getOrElse(key.description, () => "")
    const tags: Labels = key.tags.map((tag) => [tag.key, tag.value] as const)
    if (MetricKeyType.isCounterKey(key.keyType) && MetricState.isCounterState(state)) {
      family(name, "counter", help).lines.push(`${name}${labels(tags)} ${number(state.count)}`)
    } else if (MetricKeyType.isGaugeKey(key.keyType) && MetricState.isGaugeState(state)) {
      family(name, "gauge", help).lines.push(`${name}${labels(tags)} ${number(state.value)}`)
    } else if (MetricKeyType.isHistogramKey(key.keyType) && MetricState.isHistogramState(state)) {
      const lines = family(name, "histogram", help).lines
      let infinite = false
      for (const [bound, count] of state.buckets) {
        infinite = infinite || bound === Number.POSITIVE_INFINITY
        lines.push(`${name}_bucket${labels([...tags, ["le", number(bound)]])} ${number(count)}`)
      }
      if (!infinite) lines.push(`${name}_bucket${labels([...tags, ["le", "+Inf"]])} ${number(state.count)}`)
      lines.push(`${name}_sum${labels(tags)} ${number(state.sum)}`, `${name}_count${labels(tags)} ${number(state.count)}`)
    } else if (MetricKeyType.isSummaryKey(key.keyType) && MetricState.isSummaryState(state)) {
      const lines = family(name, "summary", help).lines
      for (const [quantile, value] of state.quantiles) {
        lines.push(`${name}${labels([...tags, ["quantile", number(quantile)]])} ${number(Option.getOrElse(value, () => Number.NaN))}`)
      }
      lines.push(`${name}_sum${labels(tags)} ${number(state.sum)}`, `${name}_count${labels(tags)} ${number(state.count)}`)
    } else if (MetricKeyType.isFrequencyKey(key.keyType) && MetricState.isFrequencyState(state)) {
      const lines = family(name, "counter", help).lines
      for (const [value, count] of state.occurrences) lines.push(`${name}${labels([...tags, ["value", value]])} ${number(count)}`)
    }
  }
  const out: Array<string> = []
  for (const name of [...families.keys()].sort()) {
    const { help, lines, type } = families.get(name)!
    if (help !== "") out.push(`# HELP ${name} ${escapeHelp(help)}`)
    out.push(`# TYPE ${name} ${type}`, ...lines)
  }
  return out.length === 0 ? "" : `${out.join("\n")}\n`
}
