#!/usr/bin/env bash
# Installs the pinned opencode (package.json + package-lock.json beside this script) into a
# cache outside git: ${FANOUT_TEST_AGENTS_DIR:-<repo>/target/test-agents}/opencode.
# Idempotent: does nothing when that folder already holds this exact lockfile's install.
# Prints the folder on stdout (last line).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
dest="${FANOUT_TEST_AGENTS_DIR:-$repo/target/test-agents}/opencode"
stamp="$dest/.installed-lock.sha256"
want="$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$dest/node_modules/.bin/opencode" ]]; then
  echo "$dest"
  exit 0
fi
mkdir -p "$dest"
cp "$here/package.json" "$here/package-lock.json" "$dest/"
# opencode-ai's postinstall links the platform binary (opencode-linux-x64 etc., an
# optional dependency) to bin/opencode.exe; --foreground-scripts shows it failing.
# `npm install`, not `npm ci`: the lockfile lists only the platform packages the registry
# served when it was made (opencode-linux-x64*), and `npm ci` refuses a lockfile that lacks
# the other optional platform packages. With the lockfile present, `npm install` still
# installs exactly the locked versions.
(cd "$dest" && npm install --no-audit --no-fund --foreground-scripts >&2)
if ! "$dest/node_modules/.bin/opencode" --version >/dev/null 2>&1; then
  # An npm that skipped the install script: run it by hand.
  (cd "$dest/node_modules/opencode-ai" && node ./postinstall.mjs >&2)
fi
"$dest/node_modules/.bin/opencode" --version >&2
echo "$want" > "$stamp"
echo "$dest"
