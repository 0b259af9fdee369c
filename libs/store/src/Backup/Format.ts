/**
 * The backup file: one gzip stream of UTF-8 lines, the same whichever
 * database wrote it or will read it.
 *
 *     @crm-relay-backup 1
 *     @part accounts
 *     {"id": "…", "name": "…", …}        one row per line: to_jsonb(row)
 *     @part integration_keys
 *     …
 *     @manifest {"crm_relay_version": …, "migration_level": 15, "parts": [{"table", "rows", "sha256"}]}
 *
 * A logical, per-table dump (not PGlite's data-directory tarball, not
 * pg_dump's format) so the same file restores into embedded PGlite or
 * PostgreSQL of any version we run on, and `db move` is a backup loaded
 * elsewhere. The manifest comes last because its checksums are known only
 * once every row is written: a file cut short has none and is refused.
 */
import { Effect, Schema } from "effect"
import { createHash } from "node:crypto"
import * as Fs from "node:fs"
import * as Readline from "node:readline"
import * as Zlib from "node:zlib"

const MODULUS = 1n << 256n

/** The checksum of a part's rows (see `Part`), added to row by row. */
export class RowsDigest {
  private sum = 0n
  rows = 0
  /** Adds one row line (without its newline). */
  add(line: string): void {
    this.sum = (this.sum + BigInt(`0x${createHash("sha256").update(line, "utf8").digest("hex")}`)) % MODULUS
    this.rows++
  }
  /** The checksum, as 64 hex digits. */
  hex(): string {
    return this.sum.toString(16).padStart(64, "0")
  }
}

/** The first line of every backup. */
export const MAGIC = "@crm-relay-backup 1"
const PART = "@part "
const MANIFEST = "@manifest "

/**
 * One table's rows: how many, and their checksum — the sum (mod 2^256) of
 * each row line's SHA-256, so it does not depend on the rows' order: a
 * snapshot reads them in storage order, and a target is checked in any.
 */
export const Part = Schema.Struct({ table: Schema.String, rows: Schema.Int, sha256: Schema.String })
export type Part = typeof Part.Type

/** What a backup says about itself. It holds no key: only the master keys' public ids. */
export const Manifest = Schema.Struct({
  crm_relay_version: Schema.String,
  migration_level: Schema.Int,
  migrations: Schema.Array(Schema.Tuple(Schema.Int, Schema.String)),
  database: Schema.Literal("postgres", "pglite"),
  created_at: Schema.String,
  master_key_ids: Schema.Array(Schema.String),
  parts: Schema.Array(Part)
})
export type Manifest = typeof Manifest.Type

const decodeManifest = Schema.decodeUnknownEither(Schema.parseJson(Manifest))

/** The file is not a whole, intact backup; `message` is one sentence saying why. */
export class BackupDamaged extends Schema.TaggedError<BackupDamaged>()("BackupDamaged", { message: Schema.String }) {}

/** Where lines go: a gzip stream, written with back-pressure. */
export interface Writer {
  /** Starts the part of `table`; its rows follow. */
  readonly part: (table: string) => Effect.Effect<void>
  /** Writes row lines of the current part. */
  readonly rows: (lines: ReadonlyArray<string>) => Effect.Effect<void>
  /** Writes the manifest (with the parts' counts and checksums) and ends the stream. */
  readonly finish: (manifest: Omit<Manifest, "parts">) => Effect.Effect<Manifest>
}

/** Writes a backup into `gzip` (whatever reads it: a file, an HTTP response). */
export const writer = (gzip: Zlib.Gzip): Writer => {
  const parts: Array<Part> = []
  let current: { table: string; digest: RowsDigest } | undefined
  const write = (text: string) =>
    Effect.async<void>((resume) => {
      if (gzip.write(text)) resume(Effect.void)
      else gzip.once("drain", () => resume(Effect.void))
    })
  const close = () => {
    if (current !== undefined) parts.push({ table: current.table, rows: current.digest.rows, sha256: current.digest.hex() })
    current = undefined
  }
  let started = false
  const start = Effect.suspend(() => (started ? Effect.void : ((started = true), write(`${MAGIC}\n`))))
  return {
    part: (table) =>
      Effect.zipRight(start, Effect.suspend(() => {
        close()
        current = { table, digest: new RowsDigest() }
        return write(`${PART}${table}\n`)
      })),
    rows: (lines) =>
      Effect.suspend(() => {
        if (lines.length === 0) return Effect.void
        for (const line of lines) current!.digest.add(line)
        return write(lines.join("\n") + "\n")
      }),
    finish: (about) =>
      Effect.zipRight(start, Effect.suspend(() => {
        close()
        const manifest: Manifest = { ...about, parts }
        return write(`${MANIFEST}${JSON.stringify(manifest)}\n`).pipe(
          Effect.zipRight(Effect.async<void>((resume) => {
            gzip.end(() => resume(Effect.void))
          })),
          Effect.as(manifest)
        )
      }))
  }
}

/**
 * Writes a backup into the file `path` (created, or replaced) with `use`,
 * and waits until the file has every byte.
 */
export const writeFile = <A, E, R>(path: string, use: (writer: Writer) => Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const gzip = Zlib.createGzip()
    const file = Fs.createWriteStream(path)
    const written = new Promise<Error | undefined>((resolve) => {
      file.on("close", () => resolve(undefined))
      file.on("error", resolve)
      gzip.on("error", resolve)
    })
    gzip.pipe(file)
    const result = yield* use(writer(gzip)).pipe(Effect.onExit(() => Effect.sync(() => gzip.writableEnded || gzip.end())))
    const failure = yield* Effect.promise(() => written)
    if (failure !== undefined) return yield* Effect.fail(new BackupDamaged({ message: `The backup could not be written: ${failure.message}.` }))
    return result
  })

/** What reading a backup hands on, part by part: row lines in batches. */
export type OnRows<E> = (table: string, lines: ReadonlyArray<string>) => Effect.Effect<void, E>

const BATCH = 500

/**
 * Reads the whole backup at `path`, checking it line by line: the first
 * line, every part's row count and checksum against the manifest, and the
 * manifest as the last line. `onRows` (if any) receives the rows as they
 * are read; run without it first, so nothing is written from a damaged file.
 */
export const read = <E = never>(path: string, onRows?: OnRows<E>): Effect.Effect<Manifest, BackupDamaged | E> =>
  Effect.gen(function*() {
    const damaged = (message: string) => new BackupDamaged({ message })
    const input = Fs.createReadStream(path)
    const gunzip = Zlib.createGunzip()
    const lines = Readline.createInterface({ input: input.pipe(gunzip), crlfDelay: Infinity })
    // A stream error (not gzip, cut short) ends the line reader; remember it.
    const stream: { error: Error | undefined } = { error: undefined }
    const failed = (error: Error) => {
      stream.error = error
      lines.close()
    }
    // Read through a call: stream callbacks set it, which the compiler's narrowing does not see.
    const streamError = (): Error | undefined => stream.error
    input.on("error", failed)
    gunzip.on("error", failed)
    yield* Effect.addFinalizer(() => Effect.sync(() => (lines.close(), input.destroy())))
    const iterator = lines[Symbol.asyncIterator]()
    const next = Effect.promise(() =>
      iterator.next().catch((error: Error) => {
        stream.error = error
        return { done: true as const, value: undefined }
      })
    )

    const first = yield* next
    if (streamError() !== undefined || first.done === true || first.value !== MAGIC) {
      return yield* damaged("The file is not a crm-relay backup (it does not start with one's first line).")
    }
    const seen: Array<Part> = []
    let current: { table: string; digest: RowsDigest; batch: Array<string> } | undefined
    let manifestText: string | undefined
    const flush = Effect.suspend(() => {
      if (current === undefined || current.batch.length === 0 || onRows === undefined) return Effect.void
      const batch = current.batch
      current.batch = []
      return onRows(current.table, batch)
    })
    const closePart = Effect.suspend(() => {
      if (current === undefined) return Effect.void
      const done = current
      return Effect.map(flush, () => {
        seen.push({ table: done.table, rows: done.digest.rows, sha256: done.digest.hex() })
      })
    })
    while (true) {
      const item = yield* next
      if (item.done === true) break
      const line = item.value
      if (manifestText !== undefined) return yield* damaged("The file goes on after its manifest.")
      if (line.startsWith(PART)) {
        yield* closePart
        current = { table: line.slice(PART.length), digest: new RowsDigest(), batch: [] }
      } else if (line.startsWith(MANIFEST)) {
        yield* closePart
        current = undefined
        manifestText = line.slice(MANIFEST.length)
      } else if (current !== undefined && line.startsWith("{")) {
        current.digest.add(line)
        if (onRows !== undefined) {
          current.batch.push(line)
          if (current.batch.length >= BATCH) yield* flush
        }
      } else {
        return yield* damaged("The file has a line that belongs to no part.")
      }
    }
    const cutShort = streamError()
    if (cutShort !== undefined) {
      return yield* damaged(`The file is damaged or cut short (${cutShort.message}).`)
    }
    if (manifestText === undefined) return yield* damaged("The file is cut short: it ends before its manifest.")
    const manifest = decodeManifest(manifestText)
    if (manifest._tag === "Left") return yield* damaged("The file's manifest is damaged.")
    const expected = manifest.right.parts
    const same = expected.length === seen.length &&
      expected.every((part, i) => part.table === seen[i]!.table && part.rows === seen[i]!.rows && part.sha256 === seen[i]!.sha256)
    if (!same) {
      const wrong = expected.find((part, i) => part.sha256 !== seen[i]?.sha256)?.table ?? seen[expected.length]?.table
      return yield* damaged(`The file is damaged: the rows of ${wrong ?? "a table"} do not match the manifest's checksum.`)
    }
    return manifest.right
  }).pipe(Effect.scoped)
