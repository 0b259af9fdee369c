/** Types of the Prometheus text parser (the package ships none); its output follows prom2json. */
declare module "parse-prometheus-text-format" {
  export interface Sample {
    readonly labels?: Readonly<Record<string, string>>
    readonly value?: string
    readonly buckets?: Readonly<Record<string, string>>
    readonly count?: string
    readonly sum?: string
  }
  export interface Family {
    readonly name: string
    readonly help: string
    readonly type: "COUNTER" | "GAUGE" | "HISTOGRAM" | "SUMMARY" | "UNTYPED"
    readonly metrics: ReadonlyArray<Sample>
  }
  export default function parsePrometheusTextFormat(text: string): Array<Family>
}
