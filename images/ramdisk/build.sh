#!/usr/bin/env bash
# Builds the Anvil deploy ramdisk from Debian's packages: Debian's kernel, and an initramfs holding busybox,
# the kernel modules the agent needs, the disk tools with their libraries, the agent executable and /init.
#
#   build.sh [--agent PATH] [--out DIR] [--compress zstd-N|gzip] [--no-cache]
#
# Writes OUT/anvil.kernel and OUT/anvil.initramfs (default OUT: build/ramdisk). The same inputs give the same
# bytes; the compressed result is cached under the cache dir by the hash of the uncompressed archive, so a
# rebuild with unchanged inputs only re-stages (a few seconds). --no-cache neither reads nor fills that cache.
set -euo pipefail
umask 022
export LC_ALL=C

root=$(cd "$(dirname "$0")/../.." && pwd)
here="$root/images/ramdisk"
agent="$root/build/anvil-agent"
out="$root/build/ramdisk"
# zstd -9: within 15% of -19's size at a tenth of its time (measured on this ramdisk; see docs/ramdisk.md).
compress=zstd-9
use_cache=1
cache=${ANVIL_CACHE:-"$root/.tmp/cache"}
# Fixed timestamps make the archive reproducible.
epoch=${SOURCE_DATE_EPOCH:-0}

while [ $# -gt 0 ]; do
  case "$1" in
    --agent) agent=$(realpath "$2"); shift 2 ;;
    --out) out=$2; shift 2 ;;
    --compress) compress=$2; shift 2 ;;
    --no-cache) use_cache=""; shift ;;
    -h | --help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; exit 0 ;;
    *) echo "build.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case "$compress" in
  zstd-[0-9] | zstd-1[0-9]) compressor=(zstd -q -T0 "-${compress#zstd-}" -c) ;;
  gzip) compressor=(gzip -n -9 -c) ;;
  *) echo "build.sh: --compress must be zstd-1..zstd-19 or gzip" >&2; exit 2 ;;
esac
if [ ! -x "$agent" ]; then
  echo "build.sh: no agent executable at $agent: run 'npm run build:agent' first, or pass --agent PATH" >&2
  exit 1
fi

started=$(date +%s.%N)
kernel_dir=$(bash "$root/images/kernel/fetch.sh")
version=$(cat "$kernel_dir/version")
mkdir -p "$cache/ramdisk" "$out"
# Staging trees of builds that were killed (SIGKILL skips the trap): the process named in the tree's name is
# gone. Not by age: a running build's tree is stamped with the reproducible epoch below, and a sweep by mtime
# removed a concurrent build's tree under it.
for old in "$cache/ramdisk"/stage.*; do
  [ -d "$old" ] || continue
  pid=${old##*/stage.}
  pid=${pid%%.*}
  # a name without a number is an older build's, from before builds named themselves
  case "$pid" in '' | *[!0-9]*) ;; *) kill -0 "$pid" 2>/dev/null && continue ;; esac
  rm -rf "$old" "$old.initramfs"
done
stage=$(mktemp -d "$cache/ramdisk/stage.$$.XXXXXX")
trap 'rm -rf "$stage" "$stage.initramfs"' EXIT

# Merged /usr, as on the Debian host the binaries come from, so their library paths resolve unchanged.
mkdir -p "$stage"/usr/{bin,sbin,lib,lib64} "$stage"/{dev,proc,sys,run,root,mnt,tmp,etc/anvil,var/log}
ln -s usr/bin "$stage/bin"
ln -s usr/sbin "$stage/sbin"
ln -s usr/lib "$stage/lib"
ln -s usr/lib64 "$stage/lib64"
ln -s /run "$stage/var/run"
chmod 1777 "$stage/tmp"
chmod 0700 "$stage/root"

# Copies an executable to the same path in the ramdisk, with every shared library ldd lists.
copy_with_libraries() {
  local bin=$1 dest=${2:-$1} lib
  install -D -m 0755 "$bin" "$stage$dest"
  # Scripts and static binaries have no libraries ("not a dynamic executable").
  { ldd "$bin" 2>/dev/null || true; } | awk '/=> \// {print $3} /^\t\// {print $1}' | while read -r lib; do
    [ -e "$stage$lib" ] || install -D -m 0755 "$(realpath "$lib")" "$stage$lib"
  done
}

# busybox first: its applets are the fallback for every tool a real package doesn't replace below.
copy_with_libraries "$(command -v busybox)" /usr/bin/busybox
busybox --list-full | while read -r applet; do
  [ -e "$stage/$applet" ] || [ -L "$stage/$applet" ] || ln -s /usr/bin/busybox "$stage/$applet"
done
# The tools the agent calls; real ones replace busybox's applets of the same name.
# iproute2's ip: busybox's cannot create VLANs or bonds (netconfig needs both).
tools=(ip lsblk blkid wipefs blkdiscard sfdisk partx mdadm sgdisk nvme hdparm smartctl dmidecode grub-install mkfs.fat)
for tool in "${tools[@]}"; do
  path=$(command -v "$tool") || { echo "build.sh: $tool is missing: run scripts/setup/system-deps.sh" >&2; exit 1; }
  # Whichever of bin/sbin busybox put its applet in, it must not shadow the real tool on PATH.
  rm -f "$stage/usr/bin/$tool" "$stage/usr/sbin/$tool"
  copy_with_libraries "$path"
done
ln -sf mkfs.fat "$stage$(dirname "$(command -v mkfs.fat)")/mkfs.vfat"
# LLDP (the agent's lldp inspection collector): tcpdump captures one frame per NIC, as Node has no AF_PACKET
# socket. 1.3 MB + libpcap 0.3 MB, about 0.6 MB compressed; lldpd would be larger and only gives parsed TLVs.
path=$(command -v tcpdump) || { echo "build.sh: tcpdump is missing: run scripts/setup/system-deps.sh" >&2; exit 1; }
rm -f "$stage/usr/bin/tcpdump" "$stage/usr/sbin/tcpdump"
copy_with_libraries "$path"
# GRUB's platform files for install_bootloader with the ramdisk's GRUB (images without their own): BIOS and
# UEFI, without the prebuilt monolithic EFI images (16 MB) that grub-install never reads.
for platform in i386-pc x86_64-efi; do
  [ -d "/usr/lib/grub/$platform" ] || { echo "build.sh: /usr/lib/grub/$platform is missing: run scripts/setup/system-deps.sh" >&2; exit 1; }
  mkdir -p "$stage/usr/lib/grub/$platform"
  find "/usr/lib/grub/$platform" -maxdepth 1 -type f ! -name '*.module' -exec cp {} "$stage/usr/lib/grub/$platform/" \;
done
copy_with_libraries "$agent" /usr/bin/anvil-agent

# Kernel modules: the ones drivers.md's table lists (its rows whose module column is one backticked name, in
# order) plus their dependencies from modules.dep, then a depmod of that subset so busybox modprobe works in
# the guest (for the agent too).
modules=$(awk -F'|' 'NF >= 5 { m = $3; gsub(/^[ \t]+|[ \t]+$/, "", m); if (m ~ /^`[a-z0-9_-]+`$/) print substr(m, 2, length(m) - 2) }' "$here/drivers.md")
[ -n "$modules" ] || { echo "build.sh: no modules in $here/drivers.md's table" >&2; exit 1; }
modules_src="$kernel_dir/lib/modules/$version"
modules_dst="$stage/lib/modules/$version"
mkdir -p "$modules_dst"
for module in $modules; do
  deps=$(modprobe --show-depends --ignore-install -d "$kernel_dir" -S "$version" "$module") ||
    { echo "build.sh: drivers.md lists $module, which Linux $version does not have" >&2; exit 1; }
  echo "$deps" | awk '$1 == "insmod" {print $2}'
done | sort -u | while read -r ko; do
  install -D -m 0644 "$ko" "$modules_dst/${ko#"$modules_src/"}"
done
cp "$modules_src"/modules.{order,builtin,builtin.modinfo} "$modules_dst/"
depmod -b "$stage" "$version"
# Firmware: every file a carried module names (modinfo -F firmware), from Debian's firmware packages
# (images/firmware/fetch.sh); the kernel loads it from /lib/firmware itself (no udev in the ramdisk). A named
# file none of those packages ship fails the build: add its package to fetch.sh (drivers.md, "Firmware").
firmware_dir=$(bash "$root/images/firmware/fetch.sh")
find "$modules_dst" -name '*.ko' | sort | while read -r ko; do
  modinfo -F firmware "$ko" | while read -r name; do
    src="$firmware_dir/lib/firmware/$name"
    [ -e "$src" ] || { echo "build.sh: $(basename "$ko") needs firmware $name, which no fetched package has" >&2; exit 1; }
    # the file itself where the package has a symlink (ice.pkg names a versioned file)
    install -D -m 0644 "$(realpath "$src")" "$stage/usr/lib/firmware/$name"
  done
done
echo "$modules" >"$stage/etc/anvil/modules"

install -m 0755 "$here/init" "$stage/init"
install -m 0755 "$here/udhcpc.script" "$stage/etc/anvil/udhcpc.script"
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$stage/etc/passwd"
printf 'root:x:0:\ntty:x:5:\ndisk:x:6:\n' >"$stage/etc/group"
printf 'hosts: files dns\n' >"$stage/etc/nsswitch.conf"
printf '127.0.0.1 localhost\n::1 localhost\n' >"$stage/etc/hosts"
printf 'anvil-ramdisk\n' >"$stage/etc/hostname"
# mdadm warns at every call without a config file.
mkdir -p "$stage/etc/mdadm"
printf 'HOMEHOST <none>\n' >"$stage/etc/mdadm/mdadm.conf"
{
  echo "kernel $version"
  echo "agent sha256 $(sha256sum "$agent" | cut -d' ' -f1)"
  cat "$firmware_dir/packages"
  dpkg-query -W -f='${Package} ${Version}\n' busybox-static iproute2 util-linux fdisk mdadm gdisk nvme-cli hdparm smartmontools dmidecode tcpdump dosfstools grub2-common grub-pc-bin grub-efi-amd64-bin libc6
} >"$stage/etc/anvil/build-info"

# The build id names the content, so it is computed over everything but itself.
find "$stage" -exec touch -h -d "@$epoch" {} +
content_id=$(cd "$stage" && {
  find . -printf '%p %y %m %l\n' | sort
  find . -type f -print0 | sort -z | xargs -0 sha256sum
} | sha256sum | cut -c1-16)
echo "$content_id" >"$stage/etc/anvil/build-id"
touch -h -d "@$epoch" "$stage/etc/anvil/build-id" "$stage/etc/anvil"

cached="$cache/ramdisk/$content_id-$compress.initramfs"
if [ -z "$use_cache" ]; then cached="$stage.initramfs"; fi
if [ -n "$use_cache" ] && [ -f "$cached" ]; then
  result="cached"
else
  (cd "$stage" && find . -mindepth 1 -print0 | sort -z | cpio -o -0 -H newc -R 0:0 --reproducible --quiet) |
    "${compressor[@]}" >"$cached.$$.tmp"
  # Atomic, so a concurrent build of the same content never sees half a file.
  mv "$cached.$$.tmp" "$cached"
  result="built"
  # Every agent build is a new ramdisk: keep only the few newest.
  if [ -n "$use_cache" ]; then
    find "$cache/ramdisk" -maxdepth 1 -name '*.initramfs' -printf '%T@ %p\n' | sort -rn | tail -n +5 | cut -d' ' -f2- |
      xargs -r rm -f
  fi
fi
install -m 0644 "$kernel_dir/vmlinuz" "$out/anvil.kernel"
install -m 0644 "$cached" "$out/anvil.initramfs"

finished=$(date +%s.%N)
uncompressed=$(du -sb --apparent-size "$stage" | cut -f1)
mb() { awk -v b="$1" 'BEGIN {printf "%.1f MB", b / 1000000}'; }
echo "ramdisk $content_id ($result, $compress) in $(awk -v a="$started" -v b="$finished" 'BEGIN {printf "%.1f", b - a}') s:"
echo "  $out/anvil.kernel     $(mb "$(stat -c %s "$out/anvil.kernel")") (Linux $version)"
echo "  $out/anvil.initramfs  $(mb "$(stat -c %s "$out/anvil.initramfs")") (uncompressed $(mb "$uncompressed"))"
