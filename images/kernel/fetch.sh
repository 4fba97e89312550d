#!/usr/bin/env bash
# Fetches Debian's amd64 kernel (vmlinuz + modules) into a cache dir, once; prints the dir.
# Layout: DIR/vmlinuz, DIR/lib/modules/<version>/..., DIR/version
set -euo pipefail
cache=${ANVIL_CACHE:-"$(cd "$(dirname "$0")/../.." && pwd)/.tmp/cache"}
dir="$cache/kernel"
if [ -f "$dir/vmlinuz" ] && [ -f "$dir/version" ]; then echo "$dir"; exit 0; fi
# Parallel test workers may all start on a cold cache: one fetches, the others wait for it.
mkdir -p "$cache"
exec 9>"$cache/kernel.lock"
flock 9
if [ -f "$dir/vmlinuz" ] && [ -f "$dir/version" ]; then echo "$dir"; exit 0; fi
pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
if [ -z "$pkg" ]; then apt-get update -q >&2; pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}'); fi
[ -n "$pkg" ] || { echo "fetch.sh: cannot find Debian's kernel package" >&2; exit 1; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download -q "$pkg" >&2)
mkdir -p "$work/x"; dpkg -x "$work"/*.deb "$work/x"
version=${pkg#linux-image-}
depmod -b "$work/x" "$version"
rm -rf "$dir.new"; mkdir -p "$dir.new/lib"
cp "$work/x/boot/vmlinuz-$version" "$dir.new/vmlinuz"
mv "$work/x/lib/modules" "$dir.new/lib/modules"
echo "$version" > "$dir.new/version"
rm -rf "$dir"; mv "$dir.new" "$dir"
echo "$dir"
