#!/usr/bin/env bash
# A throwaway PostgreSQL cluster on loopback, for the store tests and the crash/replica tests.
#
#   eval "$(scripts/pg_test_server.sh start)"    # exports KVPLAN_TEST_DATABASE_URL, KVPLAN_PG_DIR
#   python -m pytest tests/test_store.py
#   scripts/pg_test_server.sh stop "$KVPLAN_PG_DIR"
#
# `start` runs initdb in a fresh temp dir, starts the server on 127.0.0.1 at a free port (no
# Unix socket outside the temp dir), creates the database and prints `export` lines on stdout;
# everything else goes to stderr. PostgreSQL refuses to run as root, so as root the cluster runs
# as the `postgres` system user (Debian's package creates it) via runuser. The superuser `kvplan`
# gets a random password (scram-sha-256): other local users cannot connect. Needs the Debian
# package `postgresql` (initdb is looked up under /usr/lib/postgresql/*/bin).
set -euo pipefail

die() { echo "pg_test_server: $*" >&2; exit 1; }

pg_bindir() {
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  [ -n "$dir" ] && [ -x "$dir/initdb" ] \
    || die "no initdb under /usr/lib/postgresql/*/bin; apt-get install -y postgresql"
  echo "$dir"
}

# Run a PostgreSQL binary as the cluster's owner.
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
  local bin dir port password db=kvplan_test
  bin=$(pg_bindir)
  if [ "$(id -u)" -eq 0 ]; then
    id -u postgres >/dev/null 2>&1 || die "running as root but there is no 'postgres' user"
  fi
  dir=$(mktemp -d "${TMPDIR:-/tmp}/kvplan-pg.XXXXXX")
  [ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
  chmod 700 "$dir"
  password=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
  printf '%s\n' "$password" >"$dir/pwfile"
  [ "$(id -u)" -eq 0 ] && chown postgres: "$dir/pwfile"
  chmod 600 "$dir/pwfile"

  # --no-sync only skips fsync during initdb itself; the running server keeps fsync on.
  as_owner "$bin/initdb" -D "$dir/data" -U kvplan --pwfile="$dir/pwfile" \
    --auth-host=scram-sha-256 --auth-local=scram-sha-256 -E UTF8 --locale=C.UTF-8 \
    --no-sync >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; die "initdb failed"; }
  rm -f "$dir/pwfile"

  # Another process may take the port between free_port and the bind: retry a few times.
  local tries=0
  while :; do
    port=$(free_port)
    if as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
      -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=100" \
      start >/dev/null 2>&1; then
      break
    fi
    tries=$((tries + 1))
    [ "$tries" -lt 3 ] || { cat "$dir/server.log" >&2; die "server did not start"; }
  done

  PGPASSWORD=$password "$bin/psql" -q -h 127.0.0.1 -p "$port" -U kvplan -d postgres \
    -v ON_ERROR_STOP=1 -c "CREATE DATABASE $db" >&2 \
    || die "cannot create database $db (log: $dir/server.log)"

  echo "pg_test_server: PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on" \
    "127.0.0.1:$port, data in $dir" >&2
  echo "export KVPLAN_TEST_DATABASE_URL=postgresql://kvplan:$password@127.0.0.1:$port/$db"
  echo "export KVPLAN_PG_DIR=$dir"
}

stop() {
  local dir=${1:-${KVPLAN_PG_DIR:-}}
  [ -n "$dir" ] && [ -d "$dir/data" ] || die "usage: $0 stop DIR (the KVPLAN_PG_DIR from start)"
  case "$dir" in */kvplan-pg.*) ;; *) die "refusing to remove $dir: not a kvplan-pg temp dir" ;; esac
  as_owner "$(pg_bindir)/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}

case "${1:-}" in
  start) start ;;
  stop) stop "${2:-}" ;;
  *) die "usage: $0 start | stop DIR" ;;
esac
