#!/usr/bin/env bash
# Runs Debian's python3-openstacksdk baremetal functional suite (openstack/tests/functional/baremetal,
# shipped in the package) against a fresh conductor with fake-hardware, through a clouds.yaml whose three
# clouds (devstack, devstack-alt, devstack-admin) are noauth with a baremetal endpoint override.
# Prints one RESULT line per test and the counts.
# Usage: scripts/clients/openstacksdk-functional.sh [--markdown OUT.md] [pytest -k expression]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=conductor.sh
source "$here/conductor.sh"
markdown=()
if [ "${1:-}" = "--markdown" ]; then markdown=(--markdown "$2" --title "openstacksdk baremetal functional suite"); shift 2; fi
start_conductor
suite=/usr/lib/python3/dist-packages/openstack/tests/functional/baremetal
{
  echo "clouds:"
  for cloud in devstack devstack-alt devstack-admin; do
    cat <<CLOUD
  $cloud:
    auth_type: none
    # NOTE: the suite's require_service() asks the session, not the proxy, for the endpoint's
    # microversions: keystoneauth's noauth plugin answers with its own endpoint option.
    auth:
      endpoint: $ANVIL_URL
    baremetal_endpoint_override: $ANVIL_URL
    # a bare-metal-only cloud: the suite's set-up picks a flavor and an image only where these exist
    has_compute: false
    has_image: false
    region_name: RegionOne
CLOUD
  done
} >"$CLIENTS_TMP/clouds.yaml"
mkdir -p "$CLIENTS_TMP/run"
cd "$CLIENTS_TMP/run"
# NOTE: the suite's per-test fixture timeout is 5 s unless OS_TEST_TIMEOUT says otherwise (its tox env sets it):
# test_retired's update_node retries a 409 with backoff (0.5+1+2+4+8 s) before the ConflictException it expects.
OS_CLIENT_CONFIG_FILE="$CLIENTS_TMP/clouds.yaml" OS_CLOUD=devstack-admin OPENSTACKSDK_FUNC_TEST_TIMEOUT=300 OS_TEST_TIMEOUT=600 \
  timeout 3000 /usr/bin/python3 -m pytest "$suite" -p no:cacheprovider -q --junitxml="$CLIENTS_TMP/junit.xml" \
  ${1:+-k "$1"} >"$CLIENTS_TMP/pytest.log" 2>&1 || true
tail -3 "$CLIENTS_TMP/pytest.log" >&2
/usr/bin/python3 "$here/junit_summary.py" "$CLIENTS_TMP/junit.xml" "${markdown[@]}"
