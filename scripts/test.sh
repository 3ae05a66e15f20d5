#!/usr/bin/env bash
# test.sh — THE test command for fanout (the one the README documents).
#
# Usage:
#   scripts/test.sh [--lint] [extra `cargo test` args...]
#
# Examples:
#   scripts/test.sh                              # all workspace tests
#   scripts/test.sh -p fanout-store              # one crate
#   scripts/test.sh -p fanout-store -- --nocapture
#   scripts/test.sh --lint                       # also cargo fmt --check + clippy -D warnings
#   CI=true scripts/test.sh                      # what CI runs (lint + mandatory PostgreSQL)
#
# Behaviour:
#   * runs `cargo test --workspace --no-fail-fast [args...]` (every test binary runs,
#     so one failure does not hide the others);
#   * if FANOUT_TEST_POSTGRES_URL is already set, uses that database as is;
#     otherwise, if PostgreSQL server binaries are installed, wraps the run in
#     scripts/with-postgres.sh (throwaway cluster) so the PostgreSQL tests run;
#     otherwise warns and the PostgreSQL tests skip themselves;
#   * with CI=true: PostgreSQL is mandatory (missing binaries = failure), exports
#     FANOUT_REQUIRE_POSTGRES=1 (PostgreSQL tests fail instead of skipping without a
#     database), and runs the lints (as does --lint):
#       cargo fmt --all -- --check
#       cargo clippy --workspace --all-targets -- -D warnings
#
# Exit status: the first failing step's status.

set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

usage() { sed -n '2,/^$/{s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
section() { printf '\n==> %s\n' "$*" >&2; }
warn() { printf 'test.sh: warning: %s\n' "$*" >&2; }
die() { printf 'test.sh: error: %s\n' "$*" >&2; exit 1; }

is_ci=0
case ${CI:-} in true | TRUE | True | 1 | yes) is_ci=1 ;; esac

lint=$is_ci
cargo_args=()
while (($#)); do
    case $1 in
        --lint) lint=1; shift ;;
        -h | --help) usage; exit 0 ;;
        --) cargo_args+=("$@"); break ;; # everything after `--` goes to the test binaries
        *) cargo_args+=("$1"); shift ;;
    esac
done

command -v cargo >/dev/null 2>&1 || die "cargo not found in PATH (install Rust: https://rustup.rs)"

if ((is_ci)); then
    # One spelling for every test that reads CI (fanout_types::in_ci).
    export CI=true
    export FANOUT_REQUIRE_POSTGRES=1
fi

start=$SECONDS

# Decide how the PostgreSQL tests get a database before spending minutes on lints.
if [[ -n ${FANOUT_TEST_POSTGRES_URL:-} ]]; then
    pg_mode=existing
elif pg=$("$ROOT/scripts/with-postgres.sh" --check 2>/dev/null); then
    pg_mode=throwaway
else
    if ((is_ci)); then
        "$ROOT/scripts/with-postgres.sh" --check || true
        die "CI=true and no PostgreSQL server binaries: the PostgreSQL tests are mandatory in CI"
    fi
    pg_mode=none
    warn "PostgreSQL server binaries not found: PostgreSQL-backed tests will be SKIPPED."
    warn "install them (e.g. apt-get install postgresql-15) or set FANOUT_TEST_POSTGRES_URL."
fi

if ((lint)); then
    section "cargo fmt --all -- --check"
    cargo fmt --all -- --check
    section "cargo clippy --workspace --all-targets -- -D warnings"
    cargo clippy --workspace --all-targets -- -D warnings
fi

test_cmd=(cargo test --workspace --no-fail-fast ${cargo_args[@]+"${cargo_args[@]}"})

case $pg_mode in
    existing)
        section "${test_cmd[*]}  (PostgreSQL: existing FANOUT_TEST_POSTGRES_URL)"
        "${test_cmd[@]}"
        ;;
    throwaway)
        section "${test_cmd[*]}  (PostgreSQL: throwaway cluster, $pg)"
        "$ROOT/scripts/with-postgres.sh" "${test_cmd[@]}"
        ;;
    none)
        section "${test_cmd[*]}  (PostgreSQL: none, PostgreSQL tests skip)"
        "${test_cmd[@]}"
        ;;
esac

section "all checks passed in $((SECONDS - start))s"
