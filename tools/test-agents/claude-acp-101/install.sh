#!/usr/bin/env bash
# Installs the pinned @agentclientprotocol/claude-agent-acp 0.101.0 (package.json +
# package-lock.json beside this script); see ../pinned.sh for where, and when it does
# nothing. Prints the install folder (last line).
#
# It depends on @anthropic-ai/claude-agent-sdk 0.3.318, whose Claude Code (2.1.3xx) is a
# native binary in the optional platform package @anthropic-ai/claude-agent-sdk-linux-x64:
# `npm ci` installs the optional package of this platform from the lockfile (never run with
# --omit=optional). The adapter needs node >= 22, so the pinned node of ../node22 is
# installed first and used both for npm and to run the agent:
#   <folder>/bin/node               symlink to that node
#   <folder>/bin/claude-agent-acp   the agent's command (runs dist/index.js with it)
# No install scripts run (--ignore-scripts): none of these packages needs one.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
node_dir="$(bash "$here/../node22/install.sh" | tail -n 1)"
node_bin="$node_dir/node_modules/.bin/node"
source "$here/../pinned.sh"
pinned_begin claude-acp-101 claude-agent-acp
(cd "$dest" && PATH="$(dirname "$(readlink -f "$node_bin")"):$PATH" \
  npm ci --ignore-scripts --no-audit --no-fund >&2)
sdk="$dest/node_modules/@anthropic-ai/claude-agent-sdk-linux-x64"
test -d "$sdk" || { echo "claude-acp-101/install.sh: $sdk is missing (optional platform package)" >&2; exit 4; }
mkdir -p "$dest/bin"
ln -sfn "$(readlink -f "$node_bin")" "$dest/bin/node"
cat >"$dest/bin/claude-agent-acp" <<'SH'
#!/bin/sh
# Written by tools/test-agents/claude-acp-101/install.sh: the adapter under the pinned node 22.
here="$(dirname "$(readlink -f "$0")")"
exec "$here/node" "$here/../node_modules/@agentclientprotocol/claude-agent-acp/dist/index.js" "$@"
SH
chmod +x "$dest/bin/claude-agent-acp"
echo "node: $dest/bin/node ($("$dest/bin/node" --version))" >&2
pinned_done
