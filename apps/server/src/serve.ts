/**
 * Entry point of `crm-relay serve` in the build: the server alone, bundled
 * into one script (`dist/serve.js`) whose compiled code bin/crm-relay.js
 * keeps between runs (see there and config/CodeCache). The same program as
 * `main`'s `serve`, without the command line.
 */
import { run } from "./Binary.js"
import { serve } from "./cli/Serve.js"

run(serve)
