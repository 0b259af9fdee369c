/**
 * The heap budget (config/Heap.ts), in child Node processes of their own:
 * V8's flags are the process's, so the test's own process keeps its heap.
 * Each child runs the same workload: objects that live a little while (as
 * a request's do) and are then dropped, the event loop turning between
 * batches (as a server's does), and reports the largest young generation
 * it saw.
 */
import { describe, expect, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { join } from "node:path"
import { pathToFileURL } from "node:url"

const heapModule = pathToFileURL(join(import.meta.dirname, "..", "src", "config", "Heap.ts")).href
const MiB = 1024 * 1024

interface Report {
  readonly applied: { readonly semiSpaceMiB: number | "node"; readonly growthPercent: number | "node" } | null
  /** The largest young generation seen while the workload ran, from V8's least. */
  readonly most: number
}

/**
 * The child's script: bound (unless `semiSpaceMiB` is null), have V8 shrink its young generation to
 * its least (a last-resort collection, as the server's after start), then work.
 */
const script = (semiSpaceMiB: number | null) => `
  import { Effect } from "effect"
  import * as Heap from ${JSON.stringify(heapModule)}
  import * as V8 from "node:v8"
  import * as Vm from "node:vm"
  const applied = ${semiSpaceMiB === null ? "null" : `await Effect.runPromise(Heap.bound({ semiSpaceMiB: ${semiSpaceMiB}, growthPercent: 50 }))`}
  V8.setFlagsFromString("--expose-gc")
  Vm.runInNewContext("gc")({ type: "major", execution: "sync", flavor: "last-resort" })
  let most = 0
  const kept = new Array(2000)
  for (let round = 0; round < 20000; round++) {
    for (let i = 0; i < 100; i++) kept[(round * 100 + i) % kept.length] = { values: [i, i + 1, i + 2], text: "item " + i }
    most = Math.max(most, Heap.youngGenerationBytes())
    await new Promise((resolve) => setImmediate(resolve))
  }
  console.log(JSON.stringify({ applied, most }))
`

const run = (semiSpaceMiB: number | null, node: { readonly options?: string; readonly flags?: ReadonlyArray<string> } = {}): Promise<Report> =>
  new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [...(node.flags ?? []), "--import", "tsx", "--input-type=module", "--eval", script(semiSpaceMiB)],
      { cwd: join(import.meta.dirname, ".."), env: { ...process.env, NODE_OPTIONS: node.options ?? "" }, timeout: 120_000 },
      (error, stdout, stderr) => (error === null ? resolve(JSON.parse(stdout) as Report) : reject(new Error(`${error.message}\n${stderr}`)))
    )
  })

describe("the heap budget (HEAP_SEMI_SPACE_MIB, HEAP_GROWTH_PERCENT)", () => {
  it("without a bound, the workload makes V8 grow its young generation past 4 MiB (what the next test bounds it to)", async () => {
    const report = await run(null)
    expect(report.most).toBeGreaterThan(4 * MiB)
  })

  it("HEAP_SEMI_SPACE_MIB=2: from V8's least, the young generation grows to two semi-spaces of 2 MiB and no further", async () => {
    const report = await run(2)
    expect(report.applied).toEqual({ semiSpaceMiB: 2, growthPercent: 50 })
    expect(report.most).toBeLessThanOrEqual(4 * MiB)
    // Grown again from its least (V8 doubles it, from sizes of its own): growth stopped for good
    // once V8 shrank it would cost a collection every few hundred kilobytes.
    expect(report.most).toBeGreaterThan(2 * MiB)
  })

  it("\"--max-semi-space-size in NODE_OPTIONS wins\", as --heap-growing-percent on Node's command line: both are left alone and the budget says so", async () => {
    const report = await run(1, { options: "--max-semi-space-size=4", flags: ["--heap-growing-percent=80"] })
    expect(report.applied).toEqual({ semiSpaceMiB: "node", growthPercent: "node" })
    // Node's own bound: two semi-spaces of 4 MiB, not the setting's 1.
    expect(report.most).toBe(8 * MiB)
  })
})
