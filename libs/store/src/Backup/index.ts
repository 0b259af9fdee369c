/**
 * Backups: one file format (Format) that a consistent snapshot of either
 * database writes (Snapshot) and that loads into an empty one of either
 * kind (Load); `crm-relay db backup | restore | move` are built on it.
 */
export * as Catalog from "./Catalog.js"
export * as Format from "./Format.js"
export * as Load from "./Load.js"
export * as Snapshot from "./Snapshot.js"
