#!/usr/bin/env node
// The crm-relay binary: runs the production build in dist/ (`npx nx run @crm-relay/server:build`;
// `npm start` builds it first). Development runs the sources instead: `npm run dev -- <command>`.
import { existsSync } from "node:fs"
import * as Module from "node:module"
import * as V8 from "node:v8"

// Heap sizing for a long-running server, set before much is allocated (heap-sizing flags are read when
// the heap grows): under a steady allocation rate (a webhook drain) V8 grows the young generation to
// 128 MiB and lets the old one reach about three times what survives a collection, most of the
// process's memory. The young generation stays at its starting size and the old one grows by half of
// what survives: in `npm run bench:delivery` the drain's peak RSS fell from 274-284 to 135-137 MiB
// for 10-20 % more CPU per delivery (two runs each).
V8.setFlagsFromString("--semi-space-growth-factor=1")
V8.setFlagsFromString("--heap-growing-percent=50")

const entry = new URL("../dist/main.js", import.meta.url)
if (!existsSync(entry)) {
  process.stderr.write("crm-relay is not built: run `npx nx run @crm-relay/server:build` (npm start and npm test build it).\n")
  process.exit(1)
}
// V8's compiled code is kept between runs (NODE_COMPILE_CACHE says where; the OS temporary directory by default).
Module.enableCompileCache?.()
await import(entry.href)
