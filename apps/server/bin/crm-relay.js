#!/usr/bin/env node
// The crm-relay binary: runs the production build in dist/ (`npx nx run @crm-relay/server:build`;
// `npm start` builds it first). Development runs the sources instead: `npm run dev -- <command>`.
import { existsSync } from "node:fs"
import * as Module from "node:module"

const entry = new URL("../dist/main.js", import.meta.url)
if (!existsSync(entry)) {
  process.stderr.write("crm-relay is not built: run `npx nx run @crm-relay/server:build` (npm start and npm test build it).\n")
  process.exit(1)
}
// V8's compiled code is kept between runs (NODE_COMPILE_CACHE says where; the OS temporary directory by default).
Module.enableCompileCache?.()
await import(entry.href)
