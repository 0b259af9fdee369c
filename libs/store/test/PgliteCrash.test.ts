/**
 * PgliteCrash.watch on a real PGlite instance in memory. The trap here is
 * the native stack exhausted inside the WebAssembly instance (a deeply
 * recursive SQL function): one that never goes through Emscripten's abort,
 * and that PGlite swallows. The instance is left unclosed: after a trap, its
 * next statement would spin forever, which is why the product exits.
 */
import { describe, expect, it } from "@effect/vitest"
import { PGlite } from "@electric-sql/pglite"
import { Effect } from "effect"
import * as PgliteCrash from "../src/PgliteCrash.js"

describe("PgliteCrash: a trap of PGlite's WebAssembly instance", () => {
  it.live("the first trap is reported, while PGlite itself answers the statement as if it had no rows", () =>
    Effect.gen(function*() {
      const traps: Array<unknown> = []
      const pglite = yield* Effect.promise(() =>
        PGlite.create({ extensions: { crashWatch: PgliteCrash.watch((error) => traps.push(error)) } })
      )
      yield* Effect.promise(() =>
        pglite.exec("CREATE FUNCTION deep(n int) RETURNS int LANGUAGE sql AS $$ SELECT CASE WHEN n = 0 THEN 0 ELSE deep(n - 1) + 1 END $$")
      )
      // PostgreSQL's errors are its own error handling, not a crash.
      const refused = yield* Effect.flip(Effect.tryPromise({ try: () => pglite.query("SELECT 1/0"), catch: (error) => error }))
      expect(String(refused)).toContain("division by zero")
      expect((yield* Effect.promise(() => pglite.query<{ deep: number }>("SELECT deep(100)"))).rows).toEqual([{ deep: 100 }])
      expect(traps).toEqual([])

      const swallowed = yield* Effect.promise(() => pglite.query("SELECT deep(100000)"))
      expect(swallowed.rows).toEqual([])
      expect(traps).toHaveLength(1)
      expect(traps[0]).toBeInstanceOf(RangeError)
    }))
})
