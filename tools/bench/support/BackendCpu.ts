/**
 * CPU used by PostgreSQL's backends, read from /proc like a server's own
 * (PostgreSQL on this machine): the benches' "PostgreSQL CPU per unit of work".
 */
import type * as PgClient from "@effect/sql-pg/PgClient"
import type * as Statement from "@effect/sql/Statement"
import { Effect, Option } from "effect"
import { cpuSeconds } from "./ServerProcess.js"

/** CPU seconds used so far by each backend `where` selects in pg_stat_activity. */
export const backendCpu = (admin: PgClient.PgClient, where: Statement.Fragment) =>
  Effect.gen(function*() {
    const rows = yield* admin<{ pid: number }>`SELECT pid FROM pg_stat_activity WHERE ${where}`.pipe(Effect.orDie)
    const cpu = new Map<number, number>()
    for (const { pid } of rows) {
      // A backend that ended since, or one this machine cannot see, is left out.
      const used = yield* Effect.option(Effect.try(() => Effect.runSync(cpuSeconds(pid))))
      if (Option.isSome(used)) cpu.set(pid, used.value)
    }
    return cpu
  })

/** CPU those backends used since `before` (a backend started since counts in full); NaN when none could be read. */
export const backendCpuSince = (admin: PgClient.PgClient, where: Statement.Fragment, before: Map<number, number>) =>
  Effect.map(backendCpu(admin, where), (after) => {
    if (after.size === 0) return Number.NaN
    let total = 0
    for (const [pid, used] of after) total += used - (before.get(pid) ?? 0)
    return total
  })
