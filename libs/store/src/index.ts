/**
 * @crm-relay/store — the database: SqlClient Layers (real PostgreSQL, or
 * embedded PGlite), migrations, LISTEN/NOTIFY, and test databases.
 */
export * as Audit from "./Audit.js"
export * as Backup from "./Backup/index.js"
export * as DataDirLock from "./DataDirLock.js"
export * as Database from "./Database.js"
export * as Ids from "./Ids.js"
export * as JobHandoffs from "./JobHandoffs.js"
export * as JobQueue from "./JobQueue/index.js"
export * as Migration from "./Migration.js"
export * as Migrations from "./Migrations.js"
export * as Notifier from "./Notifier.js"
export * as PgliteClient from "./PgliteClient.js"
export * as Retention from "./Retention.js"
export * as Spans from "./Spans.js"
export * as TestDatabase from "./TestDatabase.js"
export * as TraceContext from "./TraceContext.js"
export * as V8Flags from "./V8Flags.js"
export * as Vault from "./Vault.js"
