#!/usr/bin/env bash
# Installs the pinned codex-acp (package.json + package-lock.json beside this script) into a
# cache outside git: ${FANOUT_TEST_AGENTS_DIR:-<repo>/target/test-agents}/codex.
# Idempotent: does nothing when that folder already holds this exact lockfile's install.
# Prints the folder on stdout (last line).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
dest="${FANOUT_TEST_AGENTS_DIR:-$repo/target/test-agents}/codex"
stamp="$dest/.installed-lock.sha256"
want="$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$dest/node_modules/.bin/codex-acp" ]]; then
  echo "$dest"
  exit 0
fi
mkdir -p "$dest"
cp "$here/package.json" "$here/package-lock.json" "$dest/"
(cd "$dest" && npm ci --no-audit --no-fund --foreground-scripts >&2)
"$dest/node_modules/.bin/codex" --version >&2
echo "$want" > "$stamp"
echo "$dest"
