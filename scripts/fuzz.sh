#!/usr/bin/env bash
# fuzz.sh — fuzz capture and import at scale (DESIGN 7: malformed input never panics).
#
# Usage:
#   scripts/fuzz.sh              # full size: 1,000,000 mutated lines through capture and
#                                # as many through import (release build)
#   scripts/fuzz.sh --short      # the short mode CI runs with the tests (20,000 each)
#   FANOUT_FUZZ_LINES=5000000 scripts/fuzz.sh     # another size
#   FANOUT_FUZZ_SEED=42 scripts/fuzz.sh           # another seed (the report names it)
#
# The lines are every dialect's real fixtures (crates/fanout-capture/tests/fixtures/real
# and crates/fanout-acp/tests/acp-examples), mutated (JSON nodes retyped or removed,
# bytes flipped, cut, spliced, invalid UTF-8) and fed through capture into a real SQLite
# file, and written as version 1 and version 2 transcripts (their framing damaged too)
# for `fanout import` to read back. It prints what it fed and exits non-zero on any panic.
# The target is crates/fanout-capture/benches/fuzz.rs.

set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

case ${1:-} in
    --short) exec cargo test -p fanout-capture --bench fuzz -- --nocapture ;;
    -h | --help) sed -n '2,/^$/{s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; exit 0 ;;
    "") exec cargo bench -p fanout-capture --bench fuzz ;;
    *) echo "fuzz.sh: unknown argument $1 (see --help)" >&2; exit 64 ;;
esac
