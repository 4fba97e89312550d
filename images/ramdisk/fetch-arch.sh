#!/usr/bin/env bash
# Fetches what the deploy ramdisk needs from Debian for another architecture than the host's (arm64): the
# kernel and the tools' packages with every library they depend on, into a cache dir, once; prints the dir.
#
#   fetch-arch.sh ARCH
#
# Layout: DIR/root/... (every package extracted, as a sysroot), DIR/kernel/{vmlinuz,version,lib/modules/...}
# (as images/kernel/fetch.sh lays out the host's), DIR/packages (one "name version" a line).
# apt-get runs with a private sources list, state dir and dpkg status (APT::Architecture=ARCH; images/lib/
# private-apt.sh); `apt-get install --download-only` against an empty status resolves the packages'
# dependencies, and `dpkg-deb -x` unpacks them without running any script.
set -euo pipefail
arch=${1:?usage: fetch-arch.sh ARCH}
case "$arch" in
  arm64) ;;
  *) echo "fetch-arch.sh: unsupported architecture $arch (arm64 only)" >&2; exit 2 ;;
esac
# The tools images/ramdisk/build.sh copies (their names in the host's package list there), glibc, the C++
# runtime Node's official binary links, and GRUB's arm64 EFI platform files. No grub-pc-bin: BIOS is x86 only.
packages=(
  busybox-static iproute2 util-linux fdisk mdadm gdisk nvme-cli hdparm smartmontools dmidecode tcpdump stress-ng dosfstools
  grub2-common grub-efi-arm64-bin libc6 libstdc++6 libgcc-s1
  # burnin_disk without fio: badblocks
  e2fsprogs
  # NIC firmware versions: ethtool
  ethtool
)
cache=${ANVIL_CACHE:-"$(cd "$(dirname "$0")/../.." && pwd)/.tmp/cache"}
# named by the package list too: adding a package fetches anew instead of reusing a set without it
dir="$cache/debian-$arch-$(printf '%s\n' "${packages[@]}" | sha256sum | cut -c1-12)"
if [ -f "$dir/packages" ]; then echo "$dir"; exit 0; fi
# Parallel test workers may all start on a cold cache: one fetches, the others wait for it.
mkdir -p "$cache"
exec 9>"$cache/debian-$arch.lock"
flock 9
if [ -f "$dir/packages" ]; then echo "$dir"; exit 0; fi
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
# The host's suite (bookworm), main only, for ARCH, with a private dpkg status (empty: every dependency is
# fetched) and preferences.
# shellcheck source=images/lib/private-apt.sh
. "$(dirname "$0")/../lib/private-apt.sh"
private_apt "$work" main "arch=$arch" -- \
  -o "Dir::Etc::Preferences=$work/preferences" -o "Dir::Etc::PreferencesParts=$work/none" \
  -o "Dir::State::status=$work/dpkg/status" -o "Dir::State::extended_states=$work/extended_states" \
  -o "Dir::Log=$work" -o "APT::Architecture=$arch" -o "APT::Architectures::=$arch" \
  -o APT::Install-Recommends=0 -o APT::Install-Suggests=0
mkdir -p "$work/dpkg/updates" "$work/kernel-deb"
: >"$work/dpkg/status"
apt-get "${apt_options[@]}" update >&2
apt-get "${apt_options[@]}" install -y --download-only "${packages[@]}" >&2
# The kernel alone (its package's own dependencies, initramfs-tools and kmod, are the host's business).
kernel=$(apt-cache "${apt_options[@]}" depends "linux-image-$arch" | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
[ -n "$kernel" ] || { echo "fetch-arch.sh: cannot find Debian's $arch kernel package" >&2; exit 1; }
(cd "$work/kernel-deb" && apt-get "${apt_options[@]}" download "$kernel" >&2)

rm -rf "$dir.new"; mkdir -p "$dir.new/root" "$dir.new/kernel/lib"
for deb in "$work/cache/archives"/*.deb; do
  dpkg-deb -x "$deb" "$dir.new/root"
  dpkg-deb -f "$deb" Package Version | awk '{v[NR] = $2} END {print v[1], v[2]}' >>"$dir.new/packages"
done
sort -o "$dir.new/packages" "$dir.new/packages"
mkdir -p "$work/kernel"
dpkg-deb -x "$work/kernel-deb"/*.deb "$work/kernel"
version=${kernel#linux-image-}
depmod -b "$work/kernel" "$version"
cp "$work/kernel/boot/vmlinuz-$version" "$dir.new/kernel/vmlinuz"
mv "$work/kernel/lib/modules" "$dir.new/kernel/lib/modules"
echo "$version" >"$dir.new/kernel/version"
dpkg-deb -f "$work/kernel-deb"/*.deb Package Version | awk '{v[NR] = $2} END {print v[1], v[2]}' >>"$dir.new/packages"
rm -rf "$dir"; mv "$dir.new" "$dir"
echo "$dir"
