#!/usr/bin/env bash
# Installs the pinned codex-acp 1.x (package.json + package-lock.json beside this script),
# the series that sends `_meta.codex.*`; see ../pinned.sh for where, and when it does
# nothing. ../codex holds the 2.x series.
source "$(dirname "${BASH_SOURCE[0]}")/../pinned.sh"
pinned_begin codex1 codex-acp
(cd "$dest" && npm ci --no-audit --no-fund --foreground-scripts >&2)
"$dest/node_modules/.bin/codex" --version >&2
pinned_done
