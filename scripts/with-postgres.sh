#!/usr/bin/env bash
# with-postgres.sh — run a command against a private, throwaway PostgreSQL cluster.
#
# Usage:
#   scripts/with-postgres.sh <command> [args...]
#   scripts/with-postgres.sh --check        # locate the PostgreSQL binaries, print them, exit 0/1
#   scripts/with-postgres.sh --help
#
# What it does:
#   1. creates a fresh temp dir (owned by the `postgres` OS user when run as root,
#      because initdb refuses to run as root),
#   2. initdb with trust auth, listening only on 127.0.0.1 on a free port it picks
#      (retrying a few ports), unix sockets in the temp dir, fsync off,
#   3. waits (bounded) until the server accepts connections, creates database `fanout_test`,
#   4. exports FANOUT_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:PORT/fanout_test
#      (plus PGHOST/PGPORT/PGUSER/PGDATABASE, so a bare `psql` works) and runs the command,
#   5. ALWAYS tears the cluster down (EXIT/INT/TERM/HUP): pg_ctl stop -m immediate, rm -rf
#      the temp dir, and exits with the command's exit status (128+N if killed by signal N).
#
# Environment knobs (all optional):
#   FANOUT_PG_BINDIR        directory containing initdb/pg_ctl/postgres/psql (else PATH, then
#                           /usr/lib/postgresql/*/bin newest first, /usr/pgsql-*/bin, /usr/local/pgsql/bin)
#   FANOUT_PG_PORT          use exactly this port (no random pick)
#   FANOUT_PG_TMPDIR        parent of the temp dir (default /tmp; must be traversable by `postgres`)
#   FANOUT_PG_OS_USER       OS user that owns the cluster when running as root (default postgres)
#   FANOUT_PG_START_TIMEOUT seconds to wait for the server (default 30)
#   FANOUT_PG_QUIET=1       only print errors
#
# The server log is $TMPDIR/postgres.log; it is printed if startup fails.

# shellcheck disable=SC2317  # functions below are invoked from traps
set -euo pipefail

PROG=with-postgres
DB_NAME=fanout_test
DB_SUPERUSER=postgres

# A closed stderr/stdout (e.g. `... 2>&1 | head`) must not kill this script before it has
# torn the cluster down: handle SIGPIPE with a no-op (the handler, unlike SIG_IGN, is not
# inherited by the command) and never fail on a log write.
trap ':' PIPE
log()  { [[ ${FANOUT_PG_QUIET:-0} == 1 ]] || printf '%s: %s\n' "$PROG" "$*" >&2 2>/dev/null || true; }
warn() { printf '%s: warning: %s\n' "$PROG" "$*" >&2 2>/dev/null || true; }
err()  { printf '%s: error: %s\n' "$PROG" "$*" >&2 2>/dev/null || true; }
die()  { err "$*"; exit 1; }

usage() { sed -n '2,/^$/{s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

now_ms() { local t=${EPOCHREALTIME/[.,]/}; echo $((t / 1000)); }
fmt_ms() { printf '%d.%03ds' $(($1 / 1000)) $(($1 % 1000)); }

# ---------------------------------------------------------------- locate binaries
REQUIRED_BINS=(initdb pg_ctl postgres psql)

has_all_bins() {
    local d=$1 b
    for b in "${REQUIRED_BINS[@]}"; do [[ -x $d/$b ]] || return 1; done
}

find_pg_bindir() {
    local d cand
    if [[ -n ${FANOUT_PG_BINDIR:-} ]]; then
        if has_all_bins "$FANOUT_PG_BINDIR"; then echo "$FANOUT_PG_BINDIR"; return 0; fi
        err "FANOUT_PG_BINDIR=$FANOUT_PG_BINDIR does not contain all of: ${REQUIRED_BINS[*]}"
        return 1
    fi
    # PATH (resolve symlinks, e.g. /usr/local/bin/initdb -> /usr/lib/postgresql/15/bin/initdb)
    if cand=$(command -v initdb 2>/dev/null); then
        d=$(dirname -- "$(readlink -f -- "$cand" 2>/dev/null || echo "$cand")")
        if has_all_bins "$d"; then echo "$d"; return 0; fi
        d=$(dirname -- "$cand")
        if has_all_bins "$d"; then echo "$d"; return 0; fi
    fi
    # Debian/Ubuntu layout, newest major version first; then RHEL (PGDG) and source-build layouts.
    local dirs=()
    shopt -s nullglob
    dirs+=(/usr/lib/postgresql/*/bin)
    dirs+=(/usr/pgsql-*/bin)
    shopt -u nullglob
    if ((${#dirs[@]})); then
        while IFS= read -r d; do
            if has_all_bins "$d"; then echo "$d"; return 0; fi
        done < <(printf '%s\n' "${dirs[@]}" | sort -V -r)
    fi
    if has_all_bins /usr/local/pgsql/bin; then echo /usr/local/pgsql/bin; return 0; fi
    return 1
}

missing_bins_message() {
    err "PostgreSQL server binaries not found (need: ${REQUIRED_BINS[*]})."
    err "  searched: \$FANOUT_PG_BINDIR, \$PATH, /usr/lib/postgresql/*/bin, /usr/pgsql-*/bin, /usr/local/pgsql/bin"
    err "  install:  Debian/Ubuntu: apt-get install postgresql-15   (or: postgresql)"
    err "            Fedora/RHEL:   dnf install postgresql-server"
    err "            macOS:         brew install postgresql@15"
    err "  or point FANOUT_PG_BINDIR at the directory that contains initdb."
}

if (($# == 0)); then usage >&2; exit 2; fi
case $1 in
    -h | --help) usage; exit 0 ;;
    --check)
        if bindir=$(find_pg_bindir); then
            echo "$bindir ($("$bindir/postgres" --version))"
            exit 0
        fi
        missing_bins_message
        exit 1
        ;;
    --) shift; (($#)) || { usage >&2; exit 2; } ;;
esac

BINDIR=$(find_pg_bindir) || { missing_bins_message; exit 1; }

# ---------------------------------------------------------------- OS user
# initdb/pg_ctl/postgres refuse to run as root: as root, run them as $PG_OS_USER.
if [[ $EUID -eq 0 ]]; then
    PG_OS_USER=${FANOUT_PG_OS_USER:-postgres}
    if ! id -u "$PG_OS_USER" >/dev/null 2>&1; then
        if command -v useradd >/dev/null 2>&1; then
            log "OS user '$PG_OS_USER' does not exist; creating it (initdb refuses to run as root)"
            useradd --system --user-group --no-create-home --home-dir /var/lib/postgresql \
                --shell /bin/sh "$PG_OS_USER" ||
                die "could not create OS user '$PG_OS_USER' (useradd failed)"
        else
            die "running as root but OS user '$PG_OS_USER' does not exist and useradd is unavailable;" \
                "create it (initdb refuses to run as root) or run this script as a non-root user"
        fi
    fi
    if command -v runuser >/dev/null 2>&1; then
        as_pg() { runuser -u "$PG_OS_USER" -- "$@"; }
    elif command -v setpriv >/dev/null 2>&1; then
        as_pg() { setpriv --reuid="$PG_OS_USER" --regid="$(id -g "$PG_OS_USER")" --init-groups -- "$@"; }
    else
        as_pg() { su -s /bin/sh "$PG_OS_USER" -c "$(printf '%q ' "$@")"; }
    fi
else
    PG_OS_USER=$(id -un)
    as_pg() { "$@"; }
fi

# ---------------------------------------------------------------- teardown (always)
TMP=""
DATA=""
CHILD=""
STOPPING=0

# Alive and not a zombie (the postmaster is reparented to init, which may reap it late).
pid_running() {
    kill -0 "$1" 2>/dev/null || return 1
    local st
    st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
    [[ $st != Z* ]]
}

child_alive() { [[ -n $CHILD ]] && kill -0 "$CHILD" 2>/dev/null; }

stop_child() { # $1 = signal name
    child_alive || return 0
    kill -s "$1" "$CHILD" 2>/dev/null || true
    local i
    for ((i = 0; i < 100; i++)); do child_alive || break; sleep 0.1; done
    if child_alive; then
        warn "command (pid $CHILD) still running 10s after SIG$1; sending SIGKILL"
        kill -s KILL "$CHILD" 2>/dev/null || true
    fi
    wait "$CHILD" 2>/dev/null || true
}

cleanup() {
    local rc=$?
    set +e
    trap '' INT TERM HUP
    trap - EXIT
    STOPPING=1
    stop_child TERM
    if [[ -n $TMP && -d $TMP ]]; then
        if [[ -n $DATA && -f $DATA/postmaster.pid ]]; then
            local t0 pid i
            t0=$(now_ms)
            pid=$(head -n 1 "$DATA/postmaster.pid" 2>/dev/null)
            if ! (cd "$TMP" && as_pg "$BINDIR/pg_ctl" stop -D "$DATA" -m immediate -w -t 15 >/dev/null 2>&1); then
                # pg_ctl can fail if the postmaster was already going down (e.g. it got the
                # Ctrl-C while still starting). Make sure it is gone: SIGQUIT (= immediate
                # shutdown), then SIGKILL.
                if [[ $pid =~ ^[0-9]+$ ]] && pid_running "$pid"; then
                    kill -s QUIT "$pid" 2>/dev/null
                    for ((i = 0; i < 50; i++)); do pid_running "$pid" || break; sleep 0.1; done
                    if pid_running "$pid"; then
                        warn "postmaster $pid did not stop; sending SIGKILL"
                        kill -s KILL "$pid" 2>/dev/null
                        for ((i = 0; i < 50; i++)); do pid_running "$pid" || break; sleep 0.1; done
                    fi
                fi
            fi
            log "PostgreSQL stopped in $(fmt_ms $(($(now_ms) - t0)))"
        fi
        rm -rf -- "$TMP"
    fi
    exit "$rc"
}

on_signal() { # $1 = name, $2 = number
    ((STOPPING)) && return 0
    STOPPING=1
    trap '' INT TERM HUP
    log "received SIG$1; stopping the command and the cluster"
    stop_child "$1"
    exit $((128 + $2))
}

trap cleanup EXIT
trap 'on_signal INT 2' INT
trap 'on_signal TERM 15' TERM
trap 'on_signal HUP 1' HUP

# ---------------------------------------------------------------- cluster
T_START=$(now_ms)
TMP_PARENT=${FANOUT_PG_TMPDIR:-/tmp}
[[ -d $TMP_PARENT ]] || die "FANOUT_PG_TMPDIR=$TMP_PARENT is not a directory"
TMP=$(mktemp -d "$TMP_PARENT/fanout-pg.XXXXXX") || die "mktemp failed in $TMP_PARENT"
TMP=$(cd "$TMP" && pwd -P)
[[ $TMP != *\'* && $TMP != *' '* ]] || die "temp dir path must not contain quotes or spaces: $TMP"
# Unix socket paths are limited to ~107 bytes.
((${#TMP} + 20 < 107)) || die "temp dir path too long for a unix socket: $TMP (set FANOUT_PG_TMPDIR)"
DATA=$TMP/data
LOGFILE=$TMP/postgres.log
if [[ $EUID -eq 0 ]]; then
    chown "$PG_OS_USER:$(id -gn "$PG_OS_USER")" "$TMP"
    as_pg test -w "$TMP" ||
        die "OS user '$PG_OS_USER' cannot write $TMP (is $TMP_PARENT traversable by it? set FANOUT_PG_TMPDIR)"
fi

PG_VERSION=$("$BINDIR/postgres" --version 2>/dev/null || echo "postgres (unknown version)")

if ! (cd "$TMP" && as_pg "$BINDIR/initdb" -D "$DATA" -U "$DB_SUPERUSER" -A trust -E UTF8 \
    --locale=C --no-sync >"$TMP/initdb.log" 2>&1); then
    err "initdb failed ($BINDIR/initdb as OS user '$PG_OS_USER'):"
    sed 's/^/    /' "$TMP/initdb.log" >&2 || true
    exit 1
fi
T_INITDB=$(now_ms)

cat >>"$DATA/postgresql.conf" <<CONF

# ---- throwaway test cluster (scripts/with-postgres.sh) ----
listen_addresses = '127.0.0.1'
unix_socket_directories = '$TMP'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 200
CONF

port_is_free() {
    local p=$1
    if command -v ss >/dev/null 2>&1; then
        [[ -z $(ss -Htan "( sport = :$p )" 2>/dev/null) ]] || return 1
    fi
    # Something accepting connections on it => taken.
    ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null
}

pick_port() {
    if [[ -n ${FANOUT_PG_PORT:-} ]]; then echo "$FANOUT_PG_PORT"; return 0; fi
    local i p
    for ((i = 0; i < 50; i++)); do
        # 15000-31999: below Linux's default ephemeral range (32768-60999).
        p=$((15000 + RANDOM % 17000))
        if port_is_free "$p"; then echo "$p"; return 0; fi
    done
    return 1
}

START_TIMEOUT=${FANOUT_PG_START_TIMEOUT:-30}
MAX_ATTEMPTS=5
[[ -n ${FANOUT_PG_PORT:-} ]] && MAX_ATTEMPTS=1
PORT=""
started=0
: >"$LOGFILE"
[[ $EUID -eq 0 ]] && chown "$PG_OS_USER" "$LOGFILE"
for ((attempt = 1; attempt <= MAX_ATTEMPTS; attempt++)); do
    PORT=$(pick_port) || die "could not find a free TCP port on 127.0.0.1"
    log_lines_before=$(wc -l <"$LOGFILE")
    if (cd "$TMP" && as_pg "$BINDIR/pg_ctl" start -D "$DATA" -l "$LOGFILE" -w -t "$START_TIMEOUT" \
        -o "-p $PORT" >"$TMP/pg_ctl.out" 2>&1); then
        started=1
        break
    fi
    if tail -n +"$((log_lines_before + 1))" "$LOGFILE" |
        grep -qiE 'could not bind|address already in use|could not create any TCP/IP sockets|could not create lock file'; then
        if ((attempt == MAX_ATTEMPTS)); then
            err "could not listen on 127.0.0.1:$PORT (attempt $attempt/$MAX_ATTEMPTS; see log below)"
            break
        fi
        log "could not listen on 127.0.0.1:$PORT (attempt $attempt/$MAX_ATTEMPTS, port taken?); retrying with another port"
        # make sure a half-started postmaster is gone before retrying
        (cd "$TMP" && as_pg "$BINDIR/pg_ctl" stop -D "$DATA" -m immediate -w -t 5 >/dev/null 2>&1) || true
        continue
    fi
    break
done
if ((!started)); then
    err "PostgreSQL failed to start (port $PORT, data $DATA). pg_ctl said:"
    sed 's/^/    /' "$TMP/pg_ctl.out" >&2 || true
    err "server log ($LOGFILE):"
    sed 's/^/    /' "$LOGFILE" >&2 || true
    exit 1
fi

# Bounded wait until it really accepts TCP connections (pg_ctl -w normally already did).
pg_psql() { "$BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PORT" -U "$DB_SUPERUSER" "$@"; }
ready=0
for ((i = 0; i < 100; i++)); do # ~10s
    if pg_psql -d postgres -tAc 'select 1' >/dev/null 2>&1; then ready=1; break; fi
    sleep 0.1
done
if ((!ready)); then
    err "PostgreSQL did not accept connections on 127.0.0.1:$PORT within 10s. server log ($LOGFILE):"
    sed 's/^/    /' "$LOGFILE" >&2 || true
    exit 1
fi

if ! out=$(pg_psql -d postgres -c "CREATE DATABASE $DB_NAME" 2>&1); then
    err "could not create database $DB_NAME: $out"
    exit 1
fi
T_READY=$(now_ms)

export FANOUT_TEST_POSTGRES_URL="postgres://$DB_SUPERUSER@127.0.0.1:$PORT/$DB_NAME"
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=$DB_SUPERUSER PGDATABASE=$DB_NAME

log "$PG_VERSION ready in $(fmt_ms $((T_READY - T_START))) (initdb $(fmt_ms $((T_INITDB - T_START))), start+createdb $(fmt_ms $((T_READY - T_INITDB))))"
log "FANOUT_TEST_POSTGRES_URL=$FANOUT_TEST_POSTGRES_URL (data dir $TMP, removed on exit)"

# ---------------------------------------------------------------- run the command
# Run it as a background job so that a SIGTERM/SIGINT to this script is handled immediately
# (bash defers traps while a foreground child runs). `<&0` keeps stdin (background jobs would
# otherwise get /dev/null) and `trap - INT QUIT` undoes bash's SIG_IGN for background jobs, so
# Ctrl-C still reaches the command.
(
    trap - INT QUIT TERM HUP
    exec "$@"
) <&0 &
CHILD=$!
status=0
wait "$CHILD" || status=$?
CHILD=""
exit "$status"
