/** The part of autocannon 9's API this benchmark uses (the package ships no types). */
declare module "autocannon" {
  interface Histogram {
    readonly average: number
    readonly total: number
    readonly p50: number
    readonly p90: number
    readonly p99: number
    readonly max: number
  }
  interface Request {
    method?: string
    path?: string
    headers?: Record<string, string>
  }
  interface Options {
    readonly url: string
    readonly connections?: number
    readonly amount?: number
    readonly duration?: number
    readonly timeout?: number
    readonly sampleInt?: number
    readonly requests?: ReadonlyArray<{ readonly setupRequest?: (request: Request) => Request }>
  }
  interface Result {
    readonly requests: Histogram
    readonly latency: Histogram
    readonly duration: number
    readonly errors: number
    readonly timeouts: number
    readonly non2xx: number
    readonly statusCodeStats: Record<string, { readonly count: number }>
  }
  function autocannon(options: Options): Promise<Result>
  export default autocannon
}
