#!/usr/bin/env node
// The crm-relay binary: runs the TypeScript entry point through tsx.
import { register } from "tsx/esm/api"

register()
await import("../src/main.ts")
