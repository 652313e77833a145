#!/bin/sh
# Entrypoint of echo-postgres: initdb into PGDATA once (POSTGRES_USER / POSTGRES_PASSWORD /
# POSTGRES_DB), then run the server in the foreground on every address. Arguments are passed to
# postgres (e.g. `-c shared_buffers=256MB`). Writes only PGDATA and /tmp (its unix socket).
set -eu

PGDATA="${PGDATA:-/var/lib/postgresql/data}"
POSTGRES_USER="${POSTGRES_USER:-echo}"
POSTGRES_DB="${POSTGRES_DB:-$POSTGRES_USER}"
PORT="${PGPORT:-5432}"
SOCKETS=/tmp

say() { echo "echo-postgres: $*" >&2; }

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "${POSTGRES_PASSWORD:-}" ]; then
    say "POSTGRES_PASSWORD is empty: set it (network clients authenticate with scram-sha-256)"
    exit 1
  fi
  mkdir -p "$PGDATA"
  if [ "$(stat -c %u "$PGDATA")" != "$(id -u)" ]; then
    say "$PGDATA belongs to uid $(stat -c %u "$PGDATA"), not to $(id -u): PostgreSQL refuses it; mount the volume" \
      "with that owner (fsGroup does not change the owner) or set PGDATA to a subfolder of the volume"
    exit 1
  fi
  chmod 0700 "$PGDATA"
  umask 077
  pwfile="$(mktemp /tmp/pwfile.XXXXXX)"
  trap 'rm -f "$pwfile"' EXIT
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  say "initializing $PGDATA (user $POSTGRES_USER, database $POSTGRES_DB)"
  initdb --pgdata="$PGDATA" --username="$POSTGRES_USER" --pwfile="$pwfile" --encoding=UTF8 \
    --locale=C.UTF-8 --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pwfile"
  trap - EXIT
  # Network clients: any address, password (scram) only.
  printf '%s\n' "host all all 0.0.0.0/0 scram-sha-256" "host all all ::/0 scram-sha-256" \
    >>"$PGDATA/pg_hba.conf"
  # initdb makes `postgres` (and the templates); any other database is created here.
  if [ "$POSTGRES_DB" != postgres ]; then
    pg_ctl --pgdata="$PGDATA" --wait --silent \
      --options="-c listen_addresses='' -c unix_socket_directories=$SOCKETS -p $PORT" start
    createdb --host="$SOCKETS" --port="$PORT" --username="$POSTGRES_USER" "$POSTGRES_DB"
    pg_ctl --pgdata="$PGDATA" --wait --silent --mode=fast stop
  fi
  say "initialized"
fi

exec postgres -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories="$SOCKETS" -p "$PORT" "$@"
