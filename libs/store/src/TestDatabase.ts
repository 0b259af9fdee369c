/**
 * An isolated, migrated database for one test file.
 *
 * - Default: a fresh in-memory PGlite. It is loaded from a migrated template
 *   (cached in memory and in the OS temp directory, keyed by the PGlite
 *   version and the migrations' SQL), so a test file does not pay for initdb
 *   and the migrations each time.
 * - When `DATABASE_URL` is set: a fresh schema on that PostgreSQL, reached
 *   through its own pool whose sessions set `search_path` to it, migrated,
 *   and dropped when the Layer is released.
 *
 * `TestDatabase.url` gives a child process (or a second pool) the same
 * database on PostgreSQL; on PGlite, in-process instances share the Layer.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import { Config, Context, Effect, Layer, Option, Redacted } from "effect"
import { createHash, randomBytes } from "node:crypto"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Database from "./Database.js"
import * as Migrations from "./Migrations.js"
import { migrations } from "./migrations/index.js"
import * as Notifier from "./Notifier.js"
import * as PgliteClient from "./PgliteClient.js"

/** Facts about the test database. */
export class TestDatabase extends Context.Tag("@crm-relay/store/TestDatabase")<
  TestDatabase,
  {
    readonly kind: "pglite" | "postgres"
    /** PostgreSQL only: a connection URL whose sessions use this test's schema. */
    readonly url: Option.Option<Redacted.Redacted>
    /** PostgreSQL only: the schema created for this test file. */
    readonly schema: Option.Option<string>
  }
>() {}

/** `url` with `search_path` set to `schema` for every session (libpq `options`). */
export const withSearchPath = (url: Redacted.Redacted, schema: string): Redacted.Redacted => {
  const parsed = new URL(Redacted.value(url))
  const previous = parsed.searchParams.get("options")
  const option = `-c search_path=${schema}`
  parsed.searchParams.set("options", previous === null ? option : `${previous} ${option}`)
  return Redacted.make(parsed.toString())
}

const pgliteVersion = (): string => {
  try {
    // Resolved as `require` would: the same package, and no `import.meta.resolve`, which a bundled script has none of.
    const entry = createRequire(import.meta.url).resolve("@electric-sql/pglite")
    const pkg = JSON.parse(Fs.readFileSync(Path.join(Path.dirname(entry), "..", "package.json"), "utf8"))
    return String(pkg.version)
  } catch {
    return "unknown"
  }
}

const templateKey = (): string =>
  createHash("sha256").update(pgliteVersion()).update(JSON.stringify(migrations)).digest("hex").slice(0, 24)

/** Creates, migrates and dumps a PGlite database. */
const buildTemplate: Effect.Effect<Blob> = Effect.gen(function*() {
  const pglite = yield* PgliteClient.open({})
  const client = yield* PgliteClient.make(pglite)
  yield* Migrations.run().pipe(Effect.provideService(SqlClient.SqlClient, client))
  return yield* Effect.promise(() => pglite.dumpDataDir("none"))
}).pipe(Effect.scoped, Effect.provide(Reactivity.layer), Effect.orDie)

/** The template, from the temp-directory cache or freshly built (then cached atomically). */
const loadTemplate: Effect.Effect<Blob> = Effect.gen(function*() {
  const file = Path.join(Os.tmpdir(), "crm-relay-test-db", `pglite-${templateKey()}.tar`)
  const cached = yield* Effect.sync(() => (Fs.existsSync(file) ? Option.some(Fs.readFileSync(file)) : Option.none()))
  if (Option.isSome(cached)) return new Blob([cached.value])
  const blob = yield* buildTemplate
  yield* Effect.promise(async () => {
    const bytes = Buffer.from(await blob.arrayBuffer())
    Fs.mkdirSync(Path.dirname(file), { recursive: true })
    const temporary = `${file}.${process.pid}.${randomBytes(4).toString("hex")}`
    Fs.writeFileSync(temporary, bytes)
    Fs.renameSync(temporary, file)
  }).pipe(Effect.ignore)
  return blob
})

const template = Effect.runSync(Effect.cached(loadTemplate))

/** Always PGlite: a fresh in-memory database loaded from the migrated template. */
export const layerPglite: Layer.Layer<Database.Services | PgliteClient.PgliteClient | TestDatabase> = Layer.unwrapEffect(
  Effect.map(template, (loadDataDir) =>
    Layer.mergeAll(
      Notifier.layerPglite,
      Layer.succeed(Database.DatabaseInfo, { kind: "pglite", location: "memory" }),
      Layer.succeed(TestDatabase, { kind: "pglite", url: Option.none(), schema: Option.none() }),
      Migrations.layer
    ).pipe(Layer.provideMerge(PgliteClient.layer({ loadDataDir })))
  )
).pipe(Layer.orDie)

const postgresLayer = (base: Redacted.Redacted): Layer.Layer<Database.Services | TestDatabase> =>
  Layer.unwrapScoped(
    Effect.gen(function*() {
      const schema = `test_${randomBytes(8).toString("hex")}`
      const admin = yield* PgClient.make({ url: base, maxConnections: 1 })
      yield* Effect.acquireRelease(
        admin`CREATE SCHEMA ${admin(schema)}`,
        () => admin`DROP SCHEMA IF EXISTS ${admin(schema)} CASCADE`.pipe(Effect.ignore)
      )
      const url = withSearchPath(base, schema)
      return Layer.mergeAll(
        Layer.succeed(TestDatabase, { kind: "postgres", url: Option.some(url), schema: Option.some(schema) }),
        Migrations.layer
      ).pipe(Layer.provideMerge(Database.layerPostgres({ url, poolSize: 20 })))
    }).pipe(Effect.provide(Reactivity.layer))
  ).pipe(Layer.orDie)

/**
 * An isolated, migrated database: PGlite in memory, or a fresh schema on
 * the PostgreSQL of `DATABASE_URL` when it is set.
 */
export const layer: Layer.Layer<Database.Services | TestDatabase> = Layer.unwrapEffect(
  Effect.map(
    Config.option(Config.redacted("DATABASE_URL")).pipe(Effect.orDie),
    (url) =>
      Option.match(Option.filter(url, (u) => Redacted.value(u).trim() !== ""), {
        onNone: () => layerPglite,
        onSome: postgresLayer
      })
  )
)
