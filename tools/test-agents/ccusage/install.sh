#!/usr/bin/env bash
# Installs the pinned ccusage 20.0.24 with its native binary (@ccusage/ccusage-linux-x64,
# package.json + package-lock.json beside this script), the peer of the history-import
# bench (crates/fanout-cli/benches/import_vs_ccusage.rs, DESIGN 6); see ../pinned.sh for
# where, and when it does nothing. No install scripts run (--ignore-scripts): the
# native package ships the binary itself.
source "$(dirname "${BASH_SOURCE[0]}")/../pinned.sh"
pinned_begin ccusage ccusage
# (pinned_begin checks .bin/ccusage, the JS wrapper; the native binary is checked below.)
# `npm install`, not `npm ci`: the lock holds only the linux-x64 optional binary (npm
# leaves the other platforms out of it), which `npm ci` calls out of sync; the two
# packages used are still pinned with their integrity hashes.
(cd "$dest" && npm install --ignore-scripts --no-audit --no-fund >&2)
# The wrapper's install script would mark the binary executable; scripts do not run.
chmod +x "$dest/node_modules/@ccusage/ccusage-linux-x64/bin/ccusage" 2>/dev/null || true
test -x "$dest/node_modules/@ccusage/ccusage-linux-x64/bin/ccusage" || {
    ls -R "$dest/node_modules/@ccusage" >&2
    exit 4
}
pinned_done
