#!/usr/bin/env bash
# Installs the pinned opencode (package.json + package-lock.json beside this script); see
# ../pinned.sh for where, and when it does nothing.
source "$(dirname "${BASH_SOURCE[0]}")/../pinned.sh"
pinned_begin opencode opencode
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
pinned_done
