#!/usr/bin/env bash
# Installs Debian's OpenStack services for the lab cloud (scripts/cloud/cloud.sh): Keystone, Glance,
# Placement, Nova with nova-compute-ironic, RabbitMQ and the openstack CLI (bookworm: Zed). Idempotent.
# The packages' own services are never started: the lab cloud runs its own processes on loopback, and on a
# machine without a policy-rc.d, invoke-rc.d would start the packages' daemons on their default ports.
set -euo pipefail
packages=(
  keystone glance-api placement-api nova-api nova-conductor nova-scheduler nova-compute-ironic
  rabbitmq-server python3-openstackclient python3-psycopg2 uwsgi-plugin-python3 postgresql
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
echo "setup/cloud: installing ${missing[*]}" >&2
bash "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh" "${missing[@]}"
