#!/usr/bin/env bash
# Installs the pinned Arize Phoenix 20.26.1 (requirements.txt beside this script: the
# package and everything it installs, each at the version `pip freeze` recorded) into a
# Python virtualenv, the OTLP receiver of the OpenTelemetry export tests
# (crates/fanout-cli/tests/otlp_phoenix.rs, DESIGN 12). Installs into
# ${FANOUT_TEST_AGENTS_DIR:-<repo>/target/test-agents}/phoenix and prints that folder
# (last line); the server is <folder>/venv/bin/phoenix. Idempotent: nothing happens when
# the folder already holds this exact requirements file's install (a stamp of its sha256)
# and the binary. Needs python3 (3.10 to 3.13) with its venv module; from PyPI only.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
dest="${FANOUT_TEST_AGENTS_DIR:-$repo/target/test-agents}/phoenix"
stamp="$dest/.installed-requirements.sha256"
want="$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$dest/venv/bin/phoenix" ]]; then
    echo "$dest"
    exit 0
fi
python=${PYTHON:-python3}
command -v "$python" >/dev/null 2>&1 || {
    echo "phoenix/install.sh: $python not found (install Python 3.11 with venv)" >&2
    exit 3
}
"$python" -c 'import sys; sys.exit(0 if (3, 10) <= sys.version_info[:2] <= (3, 13) else 1)' || {
    echo "phoenix/install.sh: Phoenix 20.26.1 needs Python 3.10 to 3.13, $python is $("$python" --version 2>&1)" >&2
    exit 3
}
rm -rf "$dest/venv" "$stamp"
mkdir -p "$dest"
"$python" -m venv "$dest/venv" >&2
"$dest/venv/bin/pip" install --quiet --no-input --disable-pip-version-check \
    -r "$here/requirements.txt" >&2
"$dest/venv/bin/phoenix" --help >/dev/null
echo "$want" >"$stamp"
echo "$dest"
