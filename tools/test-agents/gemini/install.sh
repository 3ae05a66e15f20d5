#!/usr/bin/env bash
# Installs the pinned Gemini CLI (package.json + package-lock.json beside this script); see
# ../pinned.sh for where, and when it does nothing.
#
# No install scripts run (--ignore-scripts) and no optional packages (node-pty, keytar):
# the CLI is one bundled file and needs neither over ACP.
source "$(dirname "${BASH_SOURCE[0]}")/../pinned.sh"
pinned_begin gemini gemini
(cd "$dest" && npm ci --ignore-scripts --omit=optional --no-audit --no-fund >&2)
test -f "$dest/node_modules/@google/gemini-cli/bundle/gemini.js"
pinned_done
