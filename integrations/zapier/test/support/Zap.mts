/**
 * The app as Zapier runs it: every operation through `createAppTester`, whose
 * output checks raise (as under `zapier test`), and Zapier's errors read back
 * the way the Zap editor shows them.
 */
import { Effect } from "effect"
import zapier from "zapier-platform-core"
import App from "../../index.js"

/** The app, loaded as Zapier loads it. */
export { App }

const appTester = zapier.createAppTester(App)

/** Runs `operation` with `bundle` through Zapier's app tester. */
export const zap = (operation: (z: never, bundle: never) => unknown, bundle: Record<string, unknown>) =>
  Effect.promise(() => appTester(operation as never, bundle as never) as Promise<unknown>)

/** A Zapier error as a user sees it: its class, the sentence, and (when it has them) code, status and delay. */
export interface ZapierError {
  readonly name: string
  readonly message: string
  readonly code?: string
  readonly status?: number
  readonly delay?: number
  readonly stack: string
}

// AppError and ThrottledError carry JSON in `message`; the other classes a plain sentence.
const read = (error: unknown): ZapierError => {
  const e = error as Error
  try {
    const parsed = JSON.parse(e.message) as { message: string; code?: string; status?: number; delay?: number }
    return { name: e.name, stack: e.stack ?? "", ...parsed }
  } catch {
    return { name: e.name, message: e.message, stack: e.stack ?? "" }
  }
}

/** Runs `operation` and answers the error it must fail with. */
export const zapFails = (operation: (z: never, bundle: never) => unknown, bundle: Record<string, unknown>) =>
  Effect.tryPromise({ try: () => appTester(operation as never, bundle as never) as Promise<unknown>, catch: read }).pipe(
    Effect.flip,
    Effect.catchAll((result) => Effect.dieMessage(`expected a Zapier error, got ${JSON.stringify(result)}`))
  )

/** The leaf paths of a delivered body, named as Zapier flattens them (`contact__full_name`). */
export const leafPaths = (value: unknown, prefix: ReadonlyArray<string> = []): Array<string> =>
  typeof value === "object" && value !== null && !Array.isArray(value)
    ? Object.entries(value).flatMap(([key, child]) => leafPaths(child, [...prefix, key]))
    : [prefix.join("__")]
