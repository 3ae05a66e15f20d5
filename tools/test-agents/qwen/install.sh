#!/usr/bin/env bash
# Installs the pinned Qwen Code (package.json + package-lock.json beside this script); see
# ../pinned.sh for where, and when it does nothing. Qwen Code 0.24 needs node >= 22: run it
# as "<node22>/node_modules/.bin/node <printed folder>/node_modules/.bin/qwen --acp", with
# node 22 from ../node22/install.sh.
#
# No install scripts run (--ignore-scripts): the CLI is bundled JavaScript; the optional
# native helpers (node-pty, clipboard, sharp, audio capture) are not needed over ACP.
# `npm install`, not `npm ci`: the registry's lockfile lacks some optional platform
# packages (@teddyzhu/clipboard-*), which `npm ci` refuses; with the lockfile present,
# `npm install` still installs exactly the locked versions.
source "$(dirname "${BASH_SOURCE[0]}")/../pinned.sh"
pinned_begin qwen qwen
(cd "$dest" && npm install --ignore-scripts --omit=optional --no-audit --no-fund >&2)
test -f "$dest/node_modules/@qwen-code/qwen-code/cli-entry.js"
pinned_done
