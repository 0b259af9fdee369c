/** The part of node-postgres 8's API the raw baseline uses (the package ships no types). */
declare module "pg" {
  interface PoolConfig {
    readonly connectionString?: string
    readonly max?: number
    readonly application_name?: string
  }
  interface QueryResult<R> {
    readonly rows: Array<R>
  }
  class Pool {
    constructor(config: PoolConfig)
    query<R>(text: string, values: ReadonlyArray<unknown>): Promise<QueryResult<R>>
    end(): Promise<void>
  }
  const pg: { readonly Pool: typeof Pool }
  export default pg
}
