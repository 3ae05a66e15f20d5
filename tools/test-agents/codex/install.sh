#!/usr/bin/env bash
# Installs the pinned codex-acp (package.json + package-lock.json beside this script); see
# ../pinned.sh for where, and when it does nothing.
source "$(dirname "${BASH_SOURCE[0]}")/../pinned.sh"
pinned_begin codex codex-acp
(cd "$dest" && npm ci --no-audit --no-fund --foreground-scripts >&2)
"$dest/node_modules/.bin/codex" --version >&2
pinned_done
