#!/usr/bin/env bash
# The n8n node package's integration pass (`npm run test:n8n`; `.ci/run` runs it once): installs the
# node package's toolchain and the real n8n when missing (install.sh), lints and builds the package
# with n8n's own CLI (`n8n-node lint`, `n8n-node build`), builds the server, typechecks and runs
# integrations/n8n's tests: the generated contract, and the package loaded into a real n8n
# (HTTPS on loopback, its own user folder and SQLite) against `crm-relay serve`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export PATH="$root/node_modules/.bin:$PATH"

"$root/tools/n8n/install.sh"

cd "$root/integrations/n8n"
echo "== n8n-nodes-crm-relay: n8n-node lint =="
npm run lint
echo "== n8n-nodes-crm-relay: n8n-node build =="
# The CLI draws a spinner; only its last lines say how the build went.
npm run build 2>&1 | tr '\r' '\n' | grep -v -e 'Building TypeScript files' -e 'Copying static files' | tail -n 20
test -f dist/nodes/CrmRelayTrigger/CrmRelayTrigger.node.js

cd "$root"
echo "== crm-relay: build the server the test starts =="
nx run @crm-relay/server:build --outputStyle=stream
echo "== n8n-nodes-crm-relay: typecheck the tests and the generator =="
tsc -p integrations/n8n/tsconfig.test.json
echo "== n8n-nodes-crm-relay: tests on a real n8n =="
vitest run --config integrations/n8n/vitest.config.mts "$@"
