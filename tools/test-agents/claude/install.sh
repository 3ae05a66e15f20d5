#!/usr/bin/env bash
# Installs the pinned Claude Code ACP agent (package.json + package-lock.json beside this
# script); see ../pinned.sh for where, and when it does nothing.
#
# No install scripts run (--ignore-scripts): the package bundles the Claude Code CLI as
# JavaScript (cli.js) and needs nothing built or downloaded.
source "$(dirname "${BASH_SOURCE[0]}")/../pinned.sh"
pinned_begin claude claude-agent-acp
(cd "$dest" && npm ci --ignore-scripts --no-audit --no-fund >&2)
test -f "$dest/node_modules/@anthropic-ai/claude-agent-sdk/cli.js"
pinned_done
