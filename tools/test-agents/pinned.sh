# pinned.sh — sourced by tools/test-agents/*/install.sh; not run on its own.
#
# Each agent folder holds a package.json + package-lock.json pinning one real ACP agent.
# Its install.sh installs them into a cache outside git,
# ${FANOUT_TEST_AGENTS_DIR:-<repo>/target/test-agents}/<name>, and prints that folder on
# stdout (last line). Idempotent: nothing happens when the folder already holds this
# exact lockfile's install (a stamp of the two files' sha256) and the agent's binary.
#
#   pinned_begin NAME BIN   exits 0 early when up to date; else copies the manifests
#                           into "$dest" for the caller's npm command
#   pinned_done             records the stamp and prints "$dest"

set -euo pipefail

pinned_begin() {
    local name=$1 bin=$2
    here="$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)"
    local repo
    repo="$(cd "$here/../../.." && pwd)"
    dest="${FANOUT_TEST_AGENTS_DIR:-$repo/target/test-agents}/$name"
    stamp="$dest/.installed-lock.sha256"
    want="$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -d' ' -f1)"
    if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$dest/node_modules/.bin/$bin" ]]; then
        echo "$dest"
        exit 0
    fi
    command -v npm >/dev/null 2>&1 || {
        echo "$name/install.sh: npm not found (install Node.js 18+)" >&2
        exit 3
    }
    mkdir -p "$dest"
    cp "$here/package.json" "$here/package-lock.json" "$dest/"
}

pinned_done() {
    echo "$want" >"$stamp"
    echo "$dest"
}
