#!/usr/bin/env bash
# Installs Debian packages (arguments) from Debian's archive with their own daemons held off: tests, benches
# and the lab cloud start their own servers on loopback, and on a machine without a policy-rc.d, invoke-rc.d
# would start the packages' daemons on their default ports (nginx on :80, PostgreSQL on :5432, Keystone…).
set -euo pipefail
[ $# -gt 0 ] || exit 0
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
policy=/usr/sbin/policy-rc.d
added_policy=""
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# added by scripts/setup/apt-install.sh while installing\nexit 101\n' | $SUDO tee "$policy" >/dev/null
  $SUDO chmod 755 "$policy"
  added_policy=1
fi
trap '[ -n "$added_policy" ] && $SUDO rm -f "$policy"' EXIT
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q >&2
$SUDO apt-get install -y -q --no-install-recommends "$@" >&2
