#!/usr/bin/env bash
# A throwaway PostgreSQL server from Debian's packages, for tests, benches and the lab.
#   postgres.sh start DIR [PORT]   initdb in DIR, start on 127.0.0.1:PORT (a free one if omitted);
#                                  prints the connection URL (postgresql://anvil@127.0.0.1:PORT/anvil) on stdout
#   postgres.sh stop DIR           stops it (fast shutdown); the caller removes DIR
# The server trusts loopback connections: it holds throwaway data only. As root it runs as the `postgres`
# user (or `nobody`), since PostgreSQL refuses to run as root. The socket lives in DIR, not /var/run.
set -euo pipefail
cmd="${1:-}"
dir="${2:-}"
if [ -z "$cmd" ] || [ -z "$dir" ]; then
  echo "usage: postgres.sh start|stop DIR [PORT]" >&2
  exit 2
fi
bin=""
for candidate in /usr/lib/postgresql/*/bin; do
  [ -x "$candidate/pg_ctl" ] && bin="$candidate"
done
if [ -z "$bin" ]; then
  echo "postgres.sh: no PostgreSQL server binaries under /usr/lib/postgresql (apt-get install postgresql)" >&2
  exit 1
fi

as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    local user=postgres
    id postgres >/dev/null 2>&1 || user=nobody
    runuser -u "$user" -- "$@"
  else
    "$@"
  fi
}

case "$cmd" in
  start)
    port="${3:-}"
    if [ -z "$port" ]; then
      port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    fi
    mkdir -p "$dir"
    if [ "$(id -u)" -eq 0 ]; then
      owner=postgres
      id postgres >/dev/null 2>&1 || owner=nobody
      chown "$owner" "$dir"
    fi
    chmod 700 "$dir"
    if ! as_owner test -x "$dir"; then
      echo "postgres.sh: the server's user cannot enter $dir (a parent directory is private); use a directory directly under /tmp" >&2
      exit 1
    fi
    as_owner "$bin/initdb" -D "$dir/data" -U anvil --auth=trust --encoding=UTF8 --no-locale >"$dir/initdb.log" 2>&1 || {
      cat "$dir/initdb.log" >&2
      exit 1
    }
    # Throwaway data: durability off is fine and makes tests and benches measure Anvil, not fsync.
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
      start >/dev/null || {
      cat "$dir/server.log" >&2
      exit 1
    }
    as_owner "$bin/createdb" -h "$dir" -p "$port" -U anvil anvil
    echo "postgresql://anvil@127.0.0.1:$port/anvil"
    ;;
  stop)
    if [ -d "$dir/data" ]; then as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null; fi
    ;;
  *)
    echo "postgres.sh: unknown command $cmd" >&2
    exit 2
    ;;
esac
