#!/usr/bin/env bash
# Runs Debian's python3-ironicclient functional suite (the `openstack baremetal` CLI, noauth) against a
# fresh conductor with fake-hardware, and prints one RESULT line per test and the counts.
# Usage: scripts/clients/ironicclient-functional.sh [--markdown OUT.md] [pytest -k expression]
# The cost is the CLI's start-up (one Python process per command, hundreds of them), so the suite's modules
# run as separate pytest processes, CLIENT_JOBS at a time (default 2), against the one conductor; every test
# creates and deletes its own resources, so they do not interfere.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=conductor.sh
source "$here/conductor.sh"
markdown=()
if [ "${1:-}" = "--markdown" ]; then markdown=(--markdown "$2" --title "python-ironicclient functional suite"); shift 2; fi
start_conductor
suite=/usr/lib/python3/dist-packages/ironicclient/tests/functional
# The suite runs its CLIs from ./.tox/functional/bin (tempest.lib's CLIClient): point that at Debian's.
mkdir -p "$CLIENTS_TMP/run/.tox/functional/bin"
ln -s /usr/bin/openstack "$CLIENTS_TMP/run/.tox/functional/bin/openstack"
ln -s /usr/bin/baremetal "$CLIENTS_TMP/run/.tox/functional/bin/baremetal"
cat >"$CLIENTS_TMP/test.conf" <<CONF
[functional]
auth_strategy = noauth
ironic_url = $ANVIL_URL
CONF
cd "$CLIENTS_TMP/run"
mkdir -p "$CLIENTS_TMP/junit"
export IRONICCLIENT_TEST_CONFIG="$CLIENTS_TMP/test.conf" OS_CLOUD="" CLIENTS_TMP suite
export FILTER="${1:-}"
run_module() {
  local name
  name=$(basename "$1" .py)
  timeout 3000 /usr/bin/python3 -m pytest "$1" -p no:cacheprovider -q --junitxml="$CLIENTS_TMP/junit/$name.xml" \
    ${FILTER:+-k "$FILTER"} >"$CLIENTS_TMP/junit/$name.log" 2>&1 || true
}
export -f run_module
# the slowest modules first, so the last ones to start are short
ls -S "$suite"/osc/v1/test_*.py | xargs -P "${CLIENT_JOBS:-2}" -I{} bash -c 'run_module "$1"' _ {}
tail -qn1 "$CLIENTS_TMP"/junit/*.log >&2
/usr/bin/python3 "$here/junit_summary.py" "$CLIENTS_TMP"/junit/*.xml "${markdown[@]}"
