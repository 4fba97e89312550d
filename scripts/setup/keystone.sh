#!/usr/bin/env bash
# A throwaway Keystone from Debian's packages (bookworm: Zed), for tests, benches and the lab.
#   keystone.sh start DIR [PORT]   configures Keystone in DIR (SQLite, fernet tokens), bootstraps it and starts
#                                  keystone-wsgi-public under uwsgi on 127.0.0.1:PORT (a free one if omitted);
#                                  prints the identity URL (http://127.0.0.1:PORT/v3) on stdout once it answers
#   keystone.sh stop DIR           stops it; the caller removes DIR
# The admin password comes from $OS_BOOTSTRAP_PASSWORD (never argv). $KEYSTONE_TOKEN_EXPIRATION sets the
# token lifetime in seconds (default 3600). Needs: apt-get install keystone uwsgi-core uwsgi-plugin-python3.
set -euo pipefail
cmd="${1:-}"
dir="${2:-}"
if [ -z "$cmd" ] || [ -z "$dir" ]; then
  echo "usage: keystone.sh start|stop DIR [PORT]" >&2
  exit 2
fi

case "$cmd" in
  start)
    for tool in keystone-manage keystone-wsgi-public uwsgi; do
      command -v "$tool" >/dev/null || {
        echo "keystone.sh: $tool missing (apt-get install keystone uwsgi-core uwsgi-plugin-python3)" >&2
        exit 1
      }
    done
    if [ -z "${OS_BOOTSTRAP_PASSWORD:-}" ]; then
      echo "keystone.sh: set OS_BOOTSTRAP_PASSWORD (the admin user's password)" >&2
      exit 2
    fi
    port="${3:-}"
    if [ -z "$port" ]; then
      port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    fi
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    url="http://127.0.0.1:$port/v3"
    cat >"$dir/keystone.conf" <<CONF
[DEFAULT]
log_file = $dir/keystone.log
[database]
connection = sqlite:///$dir/keystone.sqlite
[token]
provider = fernet
expiration = ${KEYSTONE_TOKEN_EXPIRATION:-3600}
[fernet_tokens]
key_repository = $dir/fernet-keys
[fernet_receipts]
key_repository = $dir/fernet-receipts
[credential]
key_repository = $dir/credential-keys
[cache]
enabled = false
[identity]
# throwaway users: the cheapest bcrypt Keystone allows (its default of 12 costs ~0.3 s per password check)
password_hash_rounds = 4
[oslo_policy]
# the secure defaults of later releases: administration needs a system-scoped admin token
enforce_scope = true
enforce_new_defaults = true
policy_file = $dir/policy.yaml
CONF
    echo "{}" >"$dir/policy.yaml"
    manage() { keystone-manage --config-file "$dir/keystone.conf" "$@" >>"$dir/manage.log" 2>&1; }
    # Fernet key repositories as fernet_setup makes them (0: staged, 1: primary), without its 5 s of start-up.
    for repo in fernet-keys fernet-receipts; do
      mkdir -p "$dir/$repo"
      chmod 700 "$dir/$repo"
      for n in 0 1; do
        head -c 32 /dev/urandom | base64 | tr '+/' '-_' >"$dir/$repo/$n"
        chmod 600 "$dir/$repo/$n"
      done
    done
    # uwsgi loads the app (~5 s of imports) while the database is made; it reads the database per request.
    # One process, one thread: Keystone's SQLite connections break across threads, and across processes a
    # worker's open transaction locks the others out ("database is locked"). The plain HTTP socket closes
    # each connection; saying so keeps clients from reusing a closed one.
    setsid uwsgi --plugin python3 --http-socket "127.0.0.1:$port" --add-header "Connection: close" --wsgi-file /usr/bin/keystone-wsgi-public \
      --master --processes 1 --threads 1 --die-on-term --need-app \
      --env "OS_KEYSTONE_CONFIG_FILES=$dir/keystone.conf" \
      --pidfile "$dir/uwsgi.pid" </dev/null >"$dir/uwsgi.log" 2>&1 &
    {
      # the password is read from $OS_BOOTSTRAP_PASSWORD
      manage db_sync &&
        manage bootstrap --bootstrap-admin-url "$url" --bootstrap-public-url "$url" \
          --bootstrap-internal-url "$url" --bootstrap-region-id RegionOne
    } || {
      cat "$dir/manage.log" >&2
      exit 1
    }
    for _ in $(seq 1 300); do
      if curl -fsS -o /dev/null "$url"; then
        echo "$url"
        exit 0
      fi
      sleep 0.1
    done
    echo "keystone.sh: Keystone did not answer at $url within 30 s" >&2
    tail -n 40 "$dir/uwsgi.log" "$dir/keystone.log" >&2 2>/dev/null || true
    exit 1
    ;;
  stop)
    if [ -f "$dir/uwsgi.pid" ]; then
      pid="$(cat "$dir/uwsgi.pid")"
      kill -INT "$pid" 2>/dev/null || true
      for _ in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || exit 0
        sleep 0.1
      done
      kill -KILL "$pid" 2>/dev/null || true
    fi
    ;;
  *)
    echo "keystone.sh: unknown command $cmd" >&2
    exit 2
    ;;
esac
