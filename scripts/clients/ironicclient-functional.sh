#!/usr/bin/env bash
# Runs Debian's python3-ironicclient functional suite (the `openstack baremetal` CLI, noauth) against a
# fresh conductor with fake-hardware, and prints one RESULT line per test and the counts.
# Usage: scripts/clients/ironicclient-functional.sh [--markdown OUT.md] [pytest -k expression]
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
IRONICCLIENT_TEST_CONFIG="$CLIENTS_TMP/test.conf" OS_CLOUD="" timeout 3000 /usr/bin/python3 -m pytest "$suite" \
  -p no:cacheprovider -q --junitxml="$CLIENTS_TMP/junit.xml" ${1:+-k "$1"} >"$CLIENTS_TMP/pytest.log" 2>&1 || true
tail -3 "$CLIENTS_TMP/pytest.log" >&2
/usr/bin/python3 "$here/junit_summary.py" "$CLIENTS_TMP/junit.xml" "${markdown[@]}"
