#!/usr/bin/env bash
# Installs what the n8n node package's integration pass needs, each only when it is missing or its
# lockfile changed: the node package's own toolchain (`@n8n/node-cli`, `n8n-workflow`) in
# integrations/n8n, and the real n8n the test runs (this folder). Neither is part of the root
# install: together they are about 3 000 packages and 3 GB.
#
# With the project's Node 24 first on PATH (n8n needs it, and sqlite3's binary must be built for it).
# No install scripts run (`--ignore-scripts`): all of n8n's scripts would try to build
# @confluentinc/kafka-javascript (its Kafka node, not needed here) from source and fail. sqlite3,
# the database the test uses, is then rebuilt on its own; isolated-vm ships a Node 24 prebuild.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export PATH="$root/node_modules/.bin:$PATH"

# npm ci into $1 unless the stamp there records the current lockfile; then runs the rest of the arguments.
install_once() {
  local dir="$1"; shift
  local stamp="$dir/node_modules/.crm-relay-lock.sha256"
  local sum
  sum="$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sum" ]; then
    echo "== ${dir#"$root"/}: installed (lockfile unchanged) =="
    return
  fi
  echo "== ${dir#"$root"/}: npm ci =="
  (cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund && "$@")
  echo "$sum" > "$stamp"
}

install_once "$root/integrations/n8n" true
install_once "$root/tools/n8n" npm rebuild sqlite3
