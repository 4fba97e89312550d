#!/usr/bin/env bash
# Fetches the Debian firmware packages the ramdisk's drivers need (images/ramdisk/drivers.md, "Firmware") into a
# cache dir, once; prints the dir. Layout: DIR/lib/firmware/..., DIR/packages (one "name version" a line).
# They live in Debian's non-free-firmware component: apt-get runs with a private sources list and state dir
# (images/lib/private-apt.sh), so the host's apt configuration is neither read for nor changed by them.
set -euo pipefail
packages=(firmware-qlogic firmware-misc-nonfree)
cache=${ANVIL_CACHE:-"$(cd "$(dirname "$0")/../.." && pwd)/.tmp/cache"}
dir="$cache/firmware"
if [ -f "$dir/packages" ]; then echo "$dir"; exit 0; fi
# Parallel test workers may all start on a cold cache: one fetches, the others wait for it.
mkdir -p "$cache"
exec 9>"$cache/firmware.lock"
flock 9
if [ -f "$dir/packages" ]; then echo "$dir"; exit 0; fi
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
# The same suite as the host's kernel (bookworm), non-free-firmware only.
# shellcheck source=images/lib/private-apt.sh
. "$(dirname "$0")/../lib/private-apt.sh"
private_apt "$work" non-free-firmware
mkdir -p "$work/debs"
apt-get "${apt_options[@]}" update >&2
(cd "$work/debs" && apt-get "${apt_options[@]}" download "${packages[@]}" >&2)
rm -rf "$dir.new"; mkdir -p "$dir.new"
for deb in "$work/debs"/*.deb; do
  dpkg -x "$deb" "$dir.new"
  dpkg-deb -f "$deb" Package Version | awk '{v[NR] = $2} END {print v[1], v[2]}' >>"$dir.new/packages"
done
rm -rf "$dir"; mv "$dir.new" "$dir"
echo "$dir"
