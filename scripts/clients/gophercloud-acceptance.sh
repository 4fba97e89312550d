#!/usr/bin/env bash
# Runs gophercloud's bare metal acceptance tests (Metal3's client; Debian's golang-github-gophercloud-gophercloud-dev
# 0.12 ships them under /usr/share/gocode/src) against a fresh conductor with fake-hardware: the `noauth` package
# with IRONIC_ENDPOINT, and the `httpbasic` package against the same conductor restarted with http_basic (a
# throwaway htpasswd, one admin user). The `v1` package needs Keystone (openstack.AuthOptionsFromEnv) and is
# not run. Built offline from the packaged source (GOPATH mode, no module download).
# Prints one RESULT line per test and the counts.
# Usage: scripts/clients/gophercloud-acceptance.sh [go test -run regexp]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=conductor.sh
source "$here/conductor.sh"
src=/usr/share/gocode
pkg=github.com/gophercloud/gophercloud/acceptance/openstack/baremetal
if [ ! -d "$src/src/$pkg/noauth" ] || ! command -v go >/dev/null; then
  echo "needs golang-go and golang-github-gophercloud-gophercloud-dev (scripts/setup/system-deps.sh)" >&2
  exit 2
fi
export GOPATH=$src GO111MODULE=off GOFLAGS="" GOPROXY=off GOCACHE="${GOCACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/anvil-gophercloud}"
for suite in noauth httpbasic; do
  go test -c -tags "acceptance baremetal" -o "$CLIENTS_TMP/$suite.test" "$pkg/$suite"
done

run_suite() {
  local suite=$1
  # -test.v prints `--- PASS|FAIL|SKIP: TestName`; a failure's reason is on the lines it logged before that
  (cd "$CLIENTS_TMP" && timeout 600 "./$suite.test" -test.v -test.count=1 ${FILTER:+-test.run "$FILTER"}) \
    >"$CLIENTS_TMP/$suite.log" 2>&1 || true
}
FILTER="${1:-}"

start_conductor
IRONIC_ENDPOINT="$ANVIL_URL/v1/" run_suite noauth
stop_conductor_only() {
  kill "$conductor_pid" 2>/dev/null || true
  wait "$conductor_pid" 2>/dev/null || true
  conductor_pid=""
}
stop_conductor_only

password=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
# bcrypt from the project's own dependency (Ironic's auth_basic accepts bcrypt entries only)
(cd "$repo" && ANVIL_PW="$password" node -e \
  'const b=require("bcryptjs");process.stdout.write("gophercloud:"+b.hashSync(process.env.ANVIL_PW,4)+"\n")') \
  >"$CLIENTS_TMP/htpasswd"
printf 'users:\n  gophercloud: { role: admin }\n' >"$CLIENTS_TMP/roles.yaml"
rm -f "$CLIENTS_TMP/conductor.log"
start_conductor --auth-strategy http_basic --http-basic-auth-user-file "$CLIENTS_TMP/htpasswd"
IRONIC_ENDPOINT="$ANVIL_URL/v1/" OS_USERNAME=gophercloud OS_PASSWORD="$password" run_suite httpbasic

# one RESULT line per `--- VERDICT: Test`, with the first thing the test logged that is not its own narration
for suite in noauth httpbasic; do
  sed -E 's/\x1b\[[0-9;]*m//g; s#http://127\.0\.0\.1:[0-9]+##g' "$CLIENTS_TMP/$suite.log" | awk -v suite="$suite" '
    /^=== RUN/ { reason = "" }
    /^ +[a-z_]+\.go:[0-9]+: / && !/Attempting|Deleted/ && reason == "" { sub(/^ +/, ""); reason = substr($0, 1, 300) }
    /^--- (PASS|FAIL|SKIP): / { v = $2; sub(/:$/, "", v); print "RESULT " suite "." $3 " " v (v == "PASS" ? "" : " " reason) }'
done | tee "$CLIENTS_TMP/results"
awk '{ n[$3]++ } END { printf "passed %d, failed %d, skipped %d of %d\n", n["PASS"], n["FAIL"], n["SKIP"], NR }' \
  "$CLIENTS_TMP/results"
