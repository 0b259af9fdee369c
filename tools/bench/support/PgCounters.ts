/**
 * PostgreSQL's own counters around a benchmark's work: the transactions of
 * the bench's database (pg_stat_database) and the WAL the cluster wrote
 * (pg_current_wal_lsn), with the part of it that is this database's own
 * records when pg_walinspect can tell (other databases of the cluster write
 * WAL at the same time; the LSN difference counts theirs too).
 *
 * PostgreSQL 15 keeps each backend's counts in the backend until it reports
 * them: at most once a second while it works, and within 10 s
 * (PGSTAT_IDLE_INTERVAL) once it is idle, or when it exits.
 * `pg_stat_force_next_flush()` only hurries the calling backend's own, so a
 * reading of other backends' work waits `SETTLE` first.
 */
import type * as PgClient from "@effect/sql-pg/PgClient"
import { Duration, Effect } from "effect"

/** Longer than PostgreSQL 15's PGSTAT_IDLE_INTERVAL (10 s): every backend has reported the work done before it. */
export const SETTLE = Duration.seconds(11)

/** Transactions committed or rolled back in the current database so far (pg_stat_database). */
export const transactions = (admin: PgClient.PgClient) =>
  Effect.map(
    admin<{ n: string }>`SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = current_database()`.pipe(
      Effect.orDie
    ),
    (rows) => Number(rows[0]?.n ?? 0)
  )

/** The current database's commits and rollbacks so far, and the cluster's WAL insert position, at `at` (performance.now()). */
export interface Reading {
  readonly commits: number
  readonly rollbacks: number
  readonly lsn: string
  readonly at: number
}

/**
 * One reading, in one statement. That statement is itself a transaction of this database, reported
 * later: `difference` leaves it out. The client must run nothing else in between (its own statements
 * would count), and nothing but the measured work may use this database meanwhile.
 */
export const read = (admin: PgClient.PgClient) =>
  Effect.map(
    admin<{ commits: string; rollbacks: string; lsn: string }>`SELECT xact_commit AS commits, xact_rollback AS rollbacks,
      pg_current_wal_lsn()::text AS lsn FROM pg_stat_database WHERE datname = current_database()`.pipe(Effect.orDie),
    (rows): Reading => ({
      commits: Number(rows[0]?.commits ?? 0),
      rollbacks: Number(rows[0]?.rollbacks ?? 0),
      lsn: rows[0]?.lsn ?? "0/0",
      at: performance.now()
    })
  )

/** What the database did between two readings (the later one taken once the counts settled: `SETTLE`). */
export interface Window {
  readonly seconds: number
  /** Transactions committed in this database (the first reading's own left out). */
  readonly commits: number
  readonly rollbacks: number
  /** WAL the whole cluster wrote (LSN difference): every database's, not only this one's. */
  readonly walBytes: number
}

/** The byte position an LSN (`hi/lo`, hexadecimal) names. */
const position = (lsn: string): bigint => {
  const [hi = "0", lo = "0"] = lsn.split("/")
  return (BigInt(`0x${hi}`) << 32n) + BigInt(`0x${lo}`)
}

/** The window from `before` to `after`. */
export const difference = (before: Reading, after: Reading): Window => ({
  seconds: (after.at - before.at) / 1000,
  commits: after.commits - before.commits - 1,
  rollbacks: after.rollbacks - before.rollbacks,
  walBytes: Number(position(after.lsn) - position(before.lsn))
})

/** WAL record bytes of a window, as pg_walinspect reads them from the WAL itself. */
export interface WalRecords {
  /** Every record's bytes (headers and full-page images included; page headers and padding not). */
  readonly all: number
  /** Records that change a block of this database, and the commit records of their transactions. */
  readonly ours: number
  /** Full-page images within `ours` (the first change of a page after a checkpoint writes the whole page). */
  readonly oursFullPages: number
}

/**
 * Whether pg_walinspect can be used in the current database: there already, or created for the scope
 * (and dropped at its end); false when it cannot be had (not installed, or not a superuser).
 */
export const walInspect = (admin: PgClient.PgClient) =>
  Effect.gen(function*() {
    const present = yield* admin`SELECT 1 FROM pg_extension WHERE extname = 'pg_walinspect'`.pipe(Effect.orDie)
    if (present.length > 0) return true
    return yield* Effect.acquireRelease(
      Effect.isSuccess(admin`CREATE EXTENSION pg_walinspect`),
      (created) => (created ? admin`DROP EXTENSION IF EXISTS pg_walinspect`.pipe(Effect.ignore) : Effect.void)
    )
  })

/**
 * The WAL records between `from` and `to`, split by database (the database's OID in each block reference,
 * and the commit records of the transactions that wrote those). Waits until the WAL up to `to` is flushed,
 * as pg_walinspect reads only flushed WAL.
 */
export const walRecords = (admin: PgClient.PgClient, from: string, to: string) =>
  Effect.gen(function*() {
    // No WAL in the window: pg_walinspect would refuse a start that is not before the flushed end.
    if (position(to) <= position(from)) return { all: 0, ours: 0, oursFullPages: 0 } satisfies WalRecords
    while (true) {
      const [flushed] = yield* admin<{ done: boolean }>`SELECT pg_current_wal_flush_lsn() >= ${to}::pg_lsn AS done`.pipe(Effect.orDie)
      if (flushed?.done === true) break
      yield* Effect.sleep("100 millis")
    }
    const [database] = yield* admin<{ oid: string }>`SELECT oid::text AS oid FROM pg_database WHERE datname = current_database()`.pipe(Effect.orDie)
    // block_ref reads "blkref #0: rel <tablespace>/<database>/<relation> fork main blk N".
    const pattern = `rel \\d+/${database?.oid ?? "0"}/`
    const [row] = yield* admin<{ all: string; ours: string; ours_fpi: string }>`
      WITH r AS (
        SELECT xid::text AS xid, record_length, fpi_length, coalesce(block_ref, '') AS block_ref
        FROM pg_get_wal_records_info(${from}::pg_lsn, ${to}::pg_lsn)
      ), writers AS (SELECT DISTINCT xid FROM r WHERE xid <> '0' AND block_ref ~ ${pattern}),
      ours AS (SELECT * FROM r WHERE block_ref ~ ${pattern} OR xid IN (SELECT xid FROM writers))
      SELECT (SELECT coalesce(sum(record_length), 0) FROM r) AS all,
        (SELECT coalesce(sum(record_length), 0) FROM ours) AS ours,
        (SELECT coalesce(sum(fpi_length), 0) FROM ours) AS ours_fpi`.pipe(Effect.orDie)
    return { all: Number(row?.all ?? 0), ours: Number(row?.ours ?? 0), oursFullPages: Number(row?.ours_fpi ?? 0) } satisfies WalRecords
  })

/**
 * Asks PostgreSQL for a checkpoint, so the window that follows starts with every page clean: its first
 * change of each page logs a full-page image, whichever build runs. Without it, whether a window crosses
 * a timed checkpoint (and pays the images) is luck. False when not allowed (neither superuser nor
 * pg_checkpoint).
 */
export const checkpoint = (admin: PgClient.PgClient) => Effect.isSuccess(admin`CHECKPOINT`)

/** One line of `walBreakdown`: this database's WAL of one record kind on one relation. */
export interface WalPart {
  /** pg_walinspect's resource manager and record type, e.g. `Heap/INSERT`, `Btree/INSERT_LEAF`, `Transaction/COMMIT`. */
  readonly kind: string
  /** The relation of the record's first block (its name in this database), empty for records of no relation. */
  readonly relation: string
  readonly bytes: number
  /** Full-page images within `bytes`. */
  readonly fullPages: number
  readonly records: number
}

/**
 * Where this database's WAL of a window went: bytes by record kind and relation (the first block's),
 * largest first, with the commit records of the transactions that wrote them. Call after `walRecords`
 * (which waits until the window is flushed) and before the relations are dropped.
 */
export const walBreakdown = (admin: PgClient.PgClient, from: string, to: string) =>
  Effect.gen(function*() {
    if (position(to) <= position(from)) return [] as Array<WalPart>
    const [database] = yield* admin<{ oid: string }>`SELECT oid::text AS oid FROM pg_database WHERE datname = current_database()`.pipe(Effect.orDie)
    const pattern = `rel \\d+/${database?.oid ?? "0"}/(\\d+)`
    const rows = yield* admin<{ kind: string; relation: string; bytes: string; fpi: string; records: string }>`
      WITH r AS (
        SELECT xid::text AS xid, resource_manager || '/' || record_type AS kind, record_length, fpi_length,
          substring(coalesce(block_ref, '') FROM ${pattern}) AS node
        FROM pg_get_wal_records_info(${from}::pg_lsn, ${to}::pg_lsn)
      ), writers AS (SELECT DISTINCT xid FROM r WHERE xid <> '0' AND node IS NOT NULL),
      ours AS (SELECT * FROM r WHERE node IS NOT NULL OR xid IN (SELECT xid FROM writers))
      SELECT ours.kind, coalesce(c.relname, ours.node, '') AS relation, sum(ours.record_length)::text AS bytes,
        sum(ours.fpi_length)::text AS fpi, count(*)::text AS records
      FROM ours LEFT JOIN pg_class AS c ON ours.node IS NOT NULL AND pg_relation_filenode(c.oid)::text = ours.node
      GROUP BY 1, 2 ORDER BY sum(ours.record_length) DESC`.pipe(Effect.orDie)
    return rows.map((row): WalPart => ({
      kind: row.kind,
      relation: row.relation,
      bytes: Number(row.bytes),
      fullPages: Number(row.fpi),
      records: Number(row.records)
    }))
  })
