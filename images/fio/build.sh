#!/usr/bin/env bash
# Builds the ramdisk's fio (burnin_disk, burnin_network) from Debian's source package, once; prints the dir
# holding it. Layout: DIR/fio (stripped), DIR/package (one "name version" line).
#
# Debian's fio binary links librbd, librados, libgfapi, libibverbs, libpmem, libnbd and libnuma, which bring
# ~84 MB of libraries (ceph-common, ICU, gnutls, krb5): past the ramdisk's 60 MiB budget. The burn-in steps
# need only the net, libaio and psync engines, so this builds the same source with every optional engine off:
# the binary then needs libc, libm, libz and libaio only (1.7 MB stripped, 0.4 MB compressed). The source
# comes through a private apt sources list (images/lib/private-apt.sh), the host's apt configuration untouched.
# Needs gcc, make and libaio-dev (scripts/setup/system-deps.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${ANVIL_CACHE:-"$(cd "$here/../.." && pwd)/.tmp/cache"}
# The configure flags are part of the cache key: changing them rebuilds.
configure=(
  --disable-native --prefix=/usr
  --disable-numa --disable-rdma --disable-rados --disable-rbd --disable-http --disable-gfapi --disable-libnfs
  --disable-pmem --disable-xnvme --disable-libzbc --disable-tcmalloc --disable-dfs --disable-lex
)
key=$(printf '%s\n' "${configure[@]}" | sha256sum | cut -c1-12)
dir="$cache/fio/$key"
if [ -f "$dir/package" ]; then echo "$dir"; exit 0; fi
# Parallel test workers may all start on a cold cache: one builds, the others wait for it.
mkdir -p "$cache/fio"
exec 9>"$cache/fio/build.lock"
flock 9
if [ -f "$dir/package" ]; then echo "$dir"; exit 0; fi
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
# shellcheck source=images/lib/private-apt.sh
. "$here/../lib/private-apt.sh"
private_apt "$work" main
sed -i 's/^deb /deb-src /' "$work/sources.list"
apt-get "${apt_options[@]}" update >&2
(cd "$work" && apt-get "${apt_options[@]}" source --download-only fio >&2)
dsc=$(ls "$work"/fio_*.dsc)
dpkg-source -x "$dsc" "$work/src" >&2
version=$(basename "$dsc" .dsc)
version=${version#fio_}
(
  cd "$work/src"
  ./configure "${configure[@]}" >&2
  make -j"$(nproc)" fio >&2
)
ldd "$work/src/fio" | grep -qE 'rados|rbd|gfapi|ibverbs|pmem|nbd|numa' &&
  { echo "images/fio/build.sh: fio still links an optional engine's library" >&2; exit 1; }
rm -rf "$dir.new"; mkdir -p "$dir.new"
install -m 0755 "$work/src/fio" "$dir.new/fio"
strip "$dir.new/fio"
echo "fio $version (source, optional engines off)" >"$dir.new/package"
rm -rf "$dir"; mv "$dir.new" "$dir"
echo "$dir"
