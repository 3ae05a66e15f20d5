#!/usr/bin/env bash
# Installs the pinned GitHub Copilot CLI and its linux-x64 native binary (package.json +
# package-lock.json beside this script); see ../pinned.sh for where, and when it does
# nothing. The recorder runs the binary directly:
# "<printed folder>/node_modules/@github/copilot-linux-x64/copilot --acp".
source "$(dirname "${BASH_SOURCE[0]}")/../pinned.sh"
pinned_begin copilot copilot
(cd "$dest" && npm ci --ignore-scripts --no-audit --no-fund >&2)
test -x "$dest/node_modules/@github/copilot-linux-x64/copilot"
pinned_done
