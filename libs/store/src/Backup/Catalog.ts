/**
 * What a backup needs to know of the schema, read from the database's own
 * catalog (so a new table or column is carried with no change here): the
 * tables in an order where every foreign key points backwards, each with
 * the columns an INSERT may write and the identity columns whose sequences
 * follow the rows.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { TABLE as MIGRATIONS_TABLE } from "../Migrations.js"

/** One table as a backup reads and writes it. */
export interface Table {
  readonly name: string
  /** Columns an INSERT writes (every one but the generated). */
  readonly insertable: ReadonlyArray<string>
  /** Identity columns: their sequences are set past the highest value restored. */
  readonly identity: ReadonlyArray<string>
}

/** The tables of the current schema, parents before children; the migrations table is not among them. */
export const tables = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const columns = yield* sql<{ table_name: string; column_name: string; is_generated: string; is_identity: string }>`
    SELECT c.table_name, c.column_name, c.is_generated, c.is_identity
    FROM information_schema.columns c
    JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
    WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'
    ORDER BY c.table_name, c.ordinal_position`
  const references = yield* sql<{ child: string; parent: string }>`
    SELECT child.relname AS child, parent.relname AS parent
    FROM pg_constraint f
    JOIN pg_class child ON child.oid = f.conrelid
    JOIN pg_class parent ON parent.oid = f.confrelid
    WHERE f.contype = 'f' AND f.connamespace = current_schema()::regnamespace AND f.conrelid <> f.confrelid`

  const byName = new Map<string, { insertable: Array<string>; identity: Array<string> }>()
  for (const column of columns) {
    if (column.table_name === MIGRATIONS_TABLE) continue
    const table = byName.get(column.table_name) ?? { insertable: [], identity: [] }
    byName.set(column.table_name, table)
    if (column.is_generated !== "ALWAYS") table.insertable.push(column.column_name)
    if (column.is_identity === "YES") table.identity.push(column.column_name)
  }

  // Depth-first: a table comes after every table it references.
  const parents = new Map<string, Array<string>>()
  for (const { child, parent } of references) parents.set(child, [...(parents.get(child) ?? []), parent])
  const ordered: Array<Table> = []
  const placed = new Set<string>()
  const place = (name: string, path: ReadonlySet<string>): void => {
    if (placed.has(name) || path.has(name) || !byName.has(name)) return
    for (const parent of parents.get(name) ?? []) place(parent, new Set([...path, name]))
    placed.add(name)
    const table = byName.get(name)!
    ordered.push({ name, insertable: table.insertable, identity: table.identity })
  }
  for (const name of [...byName.keys()].sort()) place(name, new Set())
  return ordered
})

/** The migrations recorded in the database, lowest first (none when it has no migrations table). */
export const migrations = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const exists = yield* sql<{ found: boolean }>`SELECT to_regclass(${MIGRATIONS_TABLE}) IS NOT NULL AS found`
  if (!exists[0]?.found) return [] as ReadonlyArray<readonly [number, string]>
  const rows = yield* sql<{ id: number; name: string }>`SELECT id, name FROM ${sql(MIGRATIONS_TABLE)} ORDER BY id`
  return rows.map((row) => [Number(row.id), row.name] as const)
})

/** How many tables the current schema has: an empty database has none. */
export const tableCount = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql<{ count: number }>`SELECT count(*)::int AS count FROM pg_tables WHERE schemaname = current_schema()`.pipe(
    Effect.map((rows) => Number(rows[0]?.count ?? 0))
  ))
