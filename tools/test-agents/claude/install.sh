#!/usr/bin/env bash
# Installs the pinned Claude Code ACP agent (package.json + package-lock.json beside this
# script) into a cache outside git: ${FANOUT_TEST_AGENTS_DIR:-<repo>/target/test-agents}/claude.
# Idempotent: does nothing when that folder already holds this exact lockfile's install.
# Prints the folder on stdout (last line).
#
# No install scripts run (--ignore-scripts): the package bundles the Claude Code CLI as
# JavaScript (cli.js) and needs nothing built or downloaded.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
dest="${FANOUT_TEST_AGENTS_DIR:-$repo/target/test-agents}/claude"
stamp="$dest/.installed-lock.sha256"
want="$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$dest/node_modules/.bin/claude-agent-acp" ]]; then
  echo "$dest"
  exit 0
fi
command -v npm >/dev/null 2>&1 || { echo "install.sh: npm not found (install Node.js 18+)" >&2; exit 3; }
mkdir -p "$dest"
cp "$here/package.json" "$here/package-lock.json" "$dest/"
(cd "$dest" && npm ci --ignore-scripts --no-audit --no-fund >&2)
test -f "$dest/node_modules/@anthropic-ai/claude-agent-sdk/cli.js"
echo "$want" > "$stamp"
echo "$dest"
