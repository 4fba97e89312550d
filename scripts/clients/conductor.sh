# Sourced by the client suites: starts a fresh conductor (fake-hardware, noauth, loopback, no fake delays)
# in its own temp directory and stops it on exit. Sets ANVIL_URL and CLIENTS_TMP.
# shellcheck shell=bash
CLIENTS_TMP=$(mktemp -d -t anvil-clients-XXXXXX)
conductor_pid=""
stop_conductor() {
  if [ -n "$conductor_pid" ]; then
    kill "$conductor_pid" 2>/dev/null || true
    wait "$conductor_pid" 2>/dev/null || true
  fi
  if [ -n "${KEEP_CLIENTS_TMP:-}" ]; then echo "kept $CLIENTS_TMP" >&2; else rm -rf "$CLIENTS_TMP"; fi
}
trap stop_conductor EXIT
# Extra arguments go to the conductor (e.g. --auth-strategy http_basic --http-basic-auth-user-file FILE).
start_conductor() {
  local repo
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  (cd "$repo" && exec node --import tsx conductor/main.ts --port 0 \
    --data-dir "$CLIENTS_TMP" --db "$CLIENTS_TMP/anvil.sqlite" --power-sync-interval-s 0 --fake-delay-ms 0 "$@") \
    >"$CLIENTS_TMP/conductor.out" 2>"$CLIENTS_TMP/conductor.log" &
  conductor_pid=$!
  for _ in $(seq 1 300); do
    ANVIL_URL=$(grep -o '"url":"http://[^"]*"' "$CLIENTS_TMP/conductor.log" 2>/dev/null | head -1 | cut -d'"' -f4 || true)
    if [ -n "$ANVIL_URL" ]; then export ANVIL_URL; return 0; fi
    kill -0 "$conductor_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "conductor did not start:" >&2
  cat "$CLIENTS_TMP/conductor.log" >&2
  return 1
}
