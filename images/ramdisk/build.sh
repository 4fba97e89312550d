#!/usr/bin/env bash
# Builds the Anvil deploy ramdisk from Debian's packages: Debian's kernel, and an initramfs holding busybox,
# the kernel modules the agent needs, the disk tools with their libraries, the agent executable and /init.
#
#   build.sh [--arch amd64|arm64] [--agent PATH] [--out DIR] [--compress zstd-N|gzip] [--no-cache]
#
# Writes OUT/anvil.kernel and OUT/anvil.initramfs (default OUT: build/ramdisk; build/arm64 for --arch arm64,
# whose agent defaults to build/arm64/anvil-agent). The host's architecture (amd64) takes the kernel and the
# tools from the host's Debian; another one (arm64) takes them from Debian's packages for it, fetched by
# images/ramdisk/fetch-arch.sh, and its modules from drivers.md as drivers-arm64.md amends it. The same inputs give the same
# bytes; the compressed result is cached under the cache dir by the hash of the uncompressed archive, so a
# rebuild with unchanged inputs only re-stages (a few seconds). --no-cache neither reads nor fills that cache.
set -euo pipefail
umask 022
export LC_ALL=C

root=$(cd "$(dirname "$0")/../.." && pwd)
here="$root/images/ramdisk"
agent=""
out=""
arch=$(dpkg --print-architecture)
# zstd -9: within 15% of -19's size at a tenth of its time (measured on this ramdisk; see docs/ramdisk.md).
compress=zstd-9
use_cache=1
cache=${ANVIL_CACHE:-"$root/.tmp/cache"}
# Fixed timestamps make the archive reproducible.
epoch=${SOURCE_DATE_EPOCH:-0}

while [ $# -gt 0 ]; do
  case "$1" in
    --arch) arch=$2; shift 2 ;;
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
# foreign: the ramdisk is for another architecture than the host's; its binaries come from sysroot.
foreign=""
sysroot=""
case "$arch" in
  "$(dpkg --print-architecture)") ;;
  arm64) foreign=1 ;;
  *) echo "build.sh: --arch must be $(dpkg --print-architecture) or arm64" >&2; exit 2 ;;
esac
if [ -n "$foreign" ]; then
  agent=${agent:-"$root/build/$arch/anvil-agent"}
  out=${out:-"$root/build/$arch"}
else
  agent=${agent:-"$root/build/anvil-agent"}
  out=${out:-"$root/build/ramdisk"}
fi
if [ ! -x "$agent" ]; then
  echo "build.sh: no agent executable at $agent: run 'npm run build:agent' first, or pass --agent PATH" >&2
  exit 1
fi

started=$(date +%s.%N)
if [ -n "$foreign" ]; then
  debian_dir=$(bash "$here/fetch-arch.sh" "$arch")
  sysroot="$debian_dir/root"
  kernel_dir="$debian_dir/kernel"
else
  kernel_dir=$(bash "$root/images/kernel/fetch.sh")
fi
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

# A path inside the foreign sysroot with its symlinks resolved there (an absolute link stays inside it).
in_sysroot() {
  local path="$sysroot$1" target hops=0
  while [ -L "$path" ] && [ "$hops" -lt 40 ]; do
    target=$(readlink "$path")
    case "$target" in /*) path="$sysroot$target" ;; *) path="$(dirname "$path")/$target" ;; esac
    hops=$((hops + 1))
  done
  echo "$path"
}
# The libraries a foreign ELF file needs (ldd cannot run it): its interpreter and the closure of its
# DT_NEEDED names, found in the sysroot's multiarch library dirs; absolute paths, one a line.
foreign_libraries() {
  local queue=("$1") seen=" " file name dir found
  readelf -l "$1" 2>/dev/null | sed -n 's/.*Requesting program interpreter: \(.*\)]$/\1/p'
  while [ ${#queue[@]} -gt 0 ]; do
    file=${queue[0]}
    queue=("${queue[@]:1}")
    for name in $(readelf -d "$file" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p'); do
      case "$seen" in *" $name "*) continue ;; esac
      seen="$seen$name "
      found=""
      for dir in /lib/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu /lib /usr/lib; do
        if [ -e "$(in_sysroot "$dir/$name")" ]; then found="$dir/$name"; break; fi
      done
      [ -n "$found" ] || { echo "build.sh: $name (needed by ${file#"$sysroot"}) is in no fetched package" >&2; exit 1; }
      echo "$found"
      queue+=("$(in_sysroot "$found")")
    done
  done
}

# Copies an executable to the same path in the ramdisk, with every shared library ldd lists.
copy_with_libraries() {
  local bin=$1 dest=${2:-$1} lib
  if [ -n "$foreign" ]; then copy_foreign_with_libraries "$bin" "$dest"; return; fi
  install -D -m 0755 "$bin" "$stage$dest"
  # Scripts and static binaries have no libraries ("not a dynamic executable").
  { ldd "$bin" 2>/dev/null || true; } | awk '/=> \// {print $3} /^\t\// {print $1}' | while read -r lib; do
    [ -e "$stage$lib" ] || install -D -m 0755 "$(realpath "$lib")" "$stage$lib"
  done
}

# The same for a foreign executable (BIN on the host, e.g. the agent, or in the sysroot), its libraries
# taken from the sysroot.
copy_foreign_with_libraries() {
  local bin=$1 dest=$2 lib libs
  install -D -m 0755 "$bin" "$stage$dest"
  libs=$(foreign_libraries "$bin") || exit 1
  for lib in $libs; do
    [ -e "$stage$lib" ] || install -D -m 0755 "$(in_sysroot "$lib")" "$stage$lib"
  done
}

# busybox first: its applets are the fallback for every tool a real package doesn't replace below.
if [ -n "$foreign" ]; then
  # NOTE: the applet list comes from the host's busybox (a foreign one cannot run here): the same Debian
  # package version is built with the same configuration on every architecture.
  copy_with_libraries "$(in_sysroot /bin/busybox)" /usr/bin/busybox
else
  copy_with_libraries "$(command -v busybox)" /usr/bin/busybox
fi
busybox --list-full | while read -r applet; do
  [ -e "$stage/$applet" ] || [ -L "$stage/$applet" ] || ln -s /usr/bin/busybox "$stage/$applet"
done
# The tools the agent calls; real ones replace busybox's applets of the same name.
# iproute2's ip: busybox's cannot create VLANs or bonds (netconfig needs both).
# tcpdump: the agent's LLDP collector captures one frame per NIC with it, as Node has no AF_PACKET socket
# (1.3 MB + libpcap 0.3 MB, about 0.6 MB compressed; lldpd would be larger and gives only parsed TLVs).
# stress-ng: burnin_cpu and burnin_memory (fio, for burnin_disk/burnin_network, is built below).
tools=(ip lsblk blkid wipefs blkdiscard sfdisk partx mdadm sgdisk nvme hdparm smartctl dmidecode tcpdump stress-ng grub-install mkfs.fat)
# burnin_disk without fio: e2fsprogs' badblocks, whose -w test writes, reads back and compares patterns over
# the whole disk (35 kB + libext2fs 0.4 MB + libcom_err, about 0.2 MB compressed).
tools+=(badblocks)
# NIC firmware versions for inspection (plugin_data nic_firmware): ethtool -i, as sysfs has no firmware version
# (0.6 MB + libmnl, about 0.25 MB compressed).
tools+=(ethtool)
# The path a tool has in the sysroot (Debian's packages still ship some in /bin and /sbin).
foreign_command() {
  local dir
  for dir in /usr/sbin /usr/bin /sbin /bin; do
    if [ -f "$(in_sysroot "$dir/$1")" ]; then echo "$dir/$1"; return 0; fi
  done
  return 1
}
for tool in "${tools[@]}"; do
  # Whichever of bin/sbin busybox put its applet in, it must not shadow the real tool on PATH.
  rm -f "$stage/usr/bin/$tool" "$stage/usr/sbin/$tool"
  if [ -n "$foreign" ]; then
    path=$(foreign_command "$tool") || { echo "build.sh: $tool is in no fetched $arch package (fetch-arch.sh)" >&2; exit 1; }
    copy_with_libraries "$(in_sysroot "$path")" "$path"
    continue
  fi
  path=$(command -v "$tool") || { echo "build.sh: $tool is missing: run scripts/setup/system-deps.sh" >&2; exit 1; }
  copy_with_libraries "$path"
done
if [ -n "$foreign" ]; then
  ln -sf mkfs.fat "$stage$(dirname "$(foreign_command mkfs.fat)")/mkfs.vfat"
else
  ln -sf mkfs.fat "$stage$(dirname "$(command -v mkfs.fat)")/mkfs.vfat"
fi
# GRUB's platform files for install_bootloader with the ramdisk's GRUB (images without their own): BIOS and
# UEFI, without the prebuilt monolithic EFI images (16 MB) that grub-install never reads.
# arm64 has UEFI only (arm64-efi; no BIOS, so no i386-pc).
platforms=(i386-pc x86_64-efi)
if [ "$arch" = arm64 ]; then platforms=(arm64-efi); fi
for platform in "${platforms[@]}"; do
  [ -d "$sysroot/usr/lib/grub/$platform" ] || { echo "build.sh: $sysroot/usr/lib/grub/$platform is missing: run scripts/setup/system-deps.sh" >&2; exit 1; }
  mkdir -p "$stage/usr/lib/grub/$platform"
  find "$sysroot/usr/lib/grub/$platform" -maxdepth 1 -type f ! -name '*.module' -exec cp {} "$stage/usr/lib/grub/$platform/" \;
done
# fio: burnin_disk and burnin_network (IPA's burnin.py runs it). Debian's binary links ~84 MB of ceph, gluster,
# rdma and ICU libraries, past the 60 MiB budget: images/fio/build.sh builds Debian's source with the optional
# engines off (net, libaio and psync stay), which needs libc, libm, libz and libaio only (about 0.4 MB
# compressed). Not on arm64 (no cross toolchain here): there burnin_disk falls back to badblocks.
fio_info=""
if [ -z "$foreign" ]; then
  fio_dir=$(bash "$root/images/fio/build.sh")
  copy_with_libraries "$fio_dir/fio" /usr/bin/fio
  fio_info=$(cat "$fio_dir/package")
fi
copy_with_libraries "$agent" /usr/bin/anvil-agent

# Kernel modules: the ones drivers.md's table lists (its rows whose module column is one backticked name, in
# order) plus their dependencies from modules.dep, then a depmod of that subset so busybox modprobe works in
# the guest (for the agent too).
table_modules() { awk -F'|' 'NF >= 5 { m = $3; gsub(/^[ \t]+|[ \t]+$/, "", m); if (m ~ /^`[a-z0-9_-]+`$/) print substr(m, 2, length(m) - 2) }' "$1"; }
modules=$(table_modules "$here/drivers.md")
[ -n "$modules" ] || { echo "build.sh: no modules in $here/drivers.md's table" >&2; exit 1; }
if [ "$arch" = arm64 ]; then
  # drivers-arm64.md: its table's modules first (the virt machine's transports), then drivers.md's but
  # those its "Not carried" list names (each line "- `name`: why").
  skipped=$(sed -n 's/^- `\([a-z0-9_-]*\)`:.*/\1/p' "$here/drivers-arm64.md")
  modules=$( (table_modules "$here/drivers-arm64.md"; echo "$modules" | grep -vxF -f <(echo "$skipped")) | awk '!seen[$0]++')
fi
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
# The drivers of PCI and virtio devices (a pci: or virtio: alias in modinfo): /init loads them only for the
# devices present, by their modalias; the rest of the list it loads always (drivers.md, "Loading").
for module in $modules; do
  aliases=$(modinfo -F alias -b "$kernel_dir" -k "$version" "$module")
  if echo "$aliases" | grep -E '^(pci|virtio):' >/dev/null; then echo "$module"; fi
done >"$stage/etc/anvil/modules-by-device"

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
  if [ -n "$foreign" ]; then
    echo "arch $arch"
    grep -E '^(busybox-static|iproute2|util-linux|fdisk|mdadm|gdisk|nvme-cli|hdparm|smartmontools|dmidecode|tcpdump|stress-ng|dosfstools|grub2-common|grub-efi-arm64-bin|libc6|libstdc\+\+6) ' "$debian_dir/packages"
  else
    dpkg-query -W -f='${Package} ${Version}\n' busybox-static iproute2 util-linux fdisk mdadm gdisk nvme-cli hdparm smartmontools dmidecode tcpdump stress-ng dosfstools grub2-common grub-pc-bin grub-efi-amd64-bin libc6
  fi
  # burnin_disk without fio; NIC firmware versions
  if [ -n "$foreign" ]; then grep -E '^(e2fsprogs|ethtool) ' "$debian_dir/packages"; else dpkg-query -W -f='${Package} ${Version}\n' e2fsprogs ethtool; fi
  # fio, built from its source package
  if [ -n "$fio_info" ]; then echo "$fio_info"; fi
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
