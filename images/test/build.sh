#!/usr/bin/env bash
# Builds a small whole-disk test image that boots by BIOS and by UEFI: an MBR (syslinux's mbr.bin) and one
# FAT16 partition holding syslinux (BIOS), syslinux.efi as EFI/BOOT/BOOTX64.EFI (UEFI), Debian's kernel and a
# tiny busybox initramfs whose init prints "ANVIL-TEST-IMAGE-BOOTED <id>" to the console (ttyS0), then
# "ANVIL-TEST-IMAGE-CONFIGDRIVE <device> uuid=<uuid>" (or "... none") from the config drive it finds, then
# "ANVIL-TEST-IMAGE-USERDATA <first line>" when the drive carries user data, and powers off. Built without
# mounting anything (mtools, syslinux on the image file, dd).
#
#   build.sh [--id ID] [--out DIR]
#
# Writes OUT/ID.raw, OUT/ID.qcow2, OUT/ID.compressed.qcow2 (qcow2 with compressed clusters),
# OUT/ID.partition.raw (a partition image: an ext4 root filesystem holding /boot/vmlinuz and /boot/initrd.img,
# the same kernel and init, no bootloader: install_bootloader puts GRUB in front of it), OUT/ID.linux-disk.raw
# (a whole-disk image: an MBR and one ext4 root partition with the same kernel and init, its own
# /boot/grub/grub.cfg, whose kernel command line carries anvil.grub_cfg=image, and its own grub-install with
# its libraries and i386-pc modules, and mdadm; no boot code: on software RAID install_bootloader runs the image's
# grub-install in a chroot for every holder, as IPA does for whole-disk images) and
# OUT/ID.sha256sums (default OUT: build/test-images, ID: anvil-test). Same inputs, same bytes; when nothing
# changed since the last build into OUT, it only prints the sizes.
set -euo pipefail
umask 022
export LC_ALL=C

root=$(cd "$(dirname "$0")/../.." && pwd)
id=anvil-test
out="$root/build/test-images"
# FAT cannot store dates before 1980; a fixed date keeps the image reproducible.
epoch=${SOURCE_DATE_EPOCH:-1577836800}
# mtools (and so syslinux's installer, which runs it) stamps files with this instead of the clock.
export SOURCE_DATE_EPOCH=$epoch
disk_mib=32
# Enough to find and read a config drive on a virtio or NVMe disk, or one behind QEMU's MegaRAID SAS (the lab's
# --root-bus megasas).
image_modules="virtio_pci virtio_blk nvme isofs megaraid_sas sd_mod"
part_start=2048 # sectors: the first partition at 1 MiB

while [ $# -gt 0 ]; do
  case "$1" in
    --id) id=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h | --help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; exit 0 ;;
    *) echo "build.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case "$id" in
  *[!A-Za-z0-9._-]* | "") echo "build.sh: --id must be letters, digits, '.', '_' or '-'" >&2; exit 2 ;;
  *) ;;
esac

started=$(date +%s.%N)
kernel_dir=$(bash "$root/images/kernel/fetch.sh")
syslinux_dir=/usr/lib/syslinux
# UEFI firmware loads \EFI\BOOT\BOOTX64.EFI from the FAT partition: syslinux's EFI build, same config.
syslinux_efi=/usr/lib/SYSLINUX.EFI/efi64/syslinux.efi
ldlinux_e64="$syslinux_dir/modules/efi64/ldlinux.e64"
for need in "$syslinux_dir/mbr/mbr.bin" "$syslinux_dir/modules/bios/ldlinux.c32" "$syslinux_efi" "$ldlinux_e64"; do
  [ -f "$need" ] || { echo "build.sh: $need is missing: run scripts/setup/system-deps.sh" >&2; exit 1; }
done
mkdir -p "$out"
raw="$out/$id.raw"
qcow2="$out/$id.qcow2"
compressed="$out/$id.compressed.qcow2"
partition="$out/$id.partition.raw"
linux_disk="$out/$id.linux-disk.raw"
# The whole-disk image's root filesystem UUID (another one than the partition image's).
disk_root_uuid=414e5649-4c00-4000-8000-6469736b7266
# The whole-disk image carries its own GRUB (BIOS) for install_bootloader to run in a chroot.
grub_install=/usr/sbin/grub-install
grub_modules=/usr/lib/grub/i386-pc
mdadm=/usr/sbin/mdadm
[ -x "$grub_install" ] && [ -f "$grub_modules/modinfo.sh" ] && [ -x "$mdadm" ] || {
  echo "build.sh: $grub_install, $grub_modules or $mdadm is missing: run scripts/setup/system-deps.sh" >&2
  exit 1
}
# The partition image's root filesystem, with a fixed UUID so the same inputs give the same bytes.
root_mib=48
root_uuid=414e5649-4c00-4000-8000-726f6f746673
stamp="$out/.$id.inputs"

inputs=$({
  sha256sum "$0" "$kernel_dir/vmlinuz" "$(command -v busybox)" "$syslinux_dir/mbr/mbr.bin" "$syslinux_efi" "$ldlinux_e64" \
    "$grub_install" "$grub_modules/modinfo.sh" "$mdadm"
  echo "$id $epoch $disk_mib $root_mib $root_uuid $disk_root_uuid $image_modules $(syslinux --version 2>&1 | head -n 1)"
} | sha256sum | cut -d' ' -f1)

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$inputs" ] && [ -f "$raw" ] && [ -f "$qcow2" ] && [ -f "$compressed" ] && [ -f "$partition" ] && [ -f "$linux_disk" ]; then
  result="up to date"
else
  result="built"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT

  # The initramfs: static busybox, the drivers to see disks and read ISO 9660, and an init that proves the
  # machine booted this disk (and shows the config drive it was given, if any), then powers off.
  initramfs="$work/initramfs"
  mkdir -p "$initramfs"/{bin,dev,proc,sys,etc,mnt,modules}
  install -m 0755 "$(command -v busybox)" "$initramfs/bin/busybox"
  ln -s busybox "$initramfs/bin/sh"
  echo "$id" >"$initramfs/etc/image-id"
  version=$(cat "$kernel_dir/version")
  # insmod in dependency order (no modules.dep in here): the order modprobe would load them.
  for module in $image_modules; do
    modprobe --show-depends --ignore-install -d "$kernel_dir" -S "$version" "$module" | awk '$1 == "insmod" {print $2}'
  done | awk '!seen[$0]++' | while read -r ko; do
    install -m 0644 "$ko" "$initramfs/modules/${ko##*/}"
    echo "${ko##*/}" >>"$initramfs/etc/modules"
  done
  cat >"$initramfs/init" <<'EOF'
#!/bin/sh
# Test image init: no cpio /dev/console node, so take the console from devtmpfs first.
export PATH=/bin
busybox mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
busybox mount -t proc proc /proc
busybox mount -t sysfs sysfs /sys
echo "ANVIL-TEST-IMAGE-BOOTED $(busybox cat /etc/image-id)"
echo "ANVIL-TEST-IMAGE-CMDLINE $(busybox cat /proc/cmdline)"
for module in $(busybox cat /etc/modules); do busybox insmod "/modules/$module" 2>/dev/null; done
# A config drive is an ISO 9660 filesystem labelled config-2, on a partition or a whole disk. Disks appear
# asynchronously after their driver loads: look for up to 5 s.
find_config_drive() {
  for dev in /sys/class/block/*; do
    name=${dev##*/}
    magic=$(busybox dd if="/dev/$name" bs=1 skip=32769 count=5 2>/dev/null)
    label=$(busybox dd if="/dev/$name" bs=1 skip=32808 count=32 2>/dev/null | busybox tr -d ' ')
    if [ "$magic" = CD001 ] && [ "$label" = config-2 ]; then echo "$name"; return; fi
  done
}
drive=""
tries=0
while [ -z "$drive" ] && [ "$tries" -lt 25 ]; do
  drive=$(find_config_drive)
  [ -n "$drive" ] || busybox sleep 0.2
  tries=$((tries + 1))
done
if [ -n "$drive" ] && busybox mount -t iso9660 -o ro "/dev/$drive" /mnt; then
  uuid=$(busybox sed -n 's/.*"uuid": *"\([^"]*\)".*/\1/p' /mnt/openstack/latest/meta_data.json 2>/dev/null)
  echo "ANVIL-TEST-IMAGE-CONFIGDRIVE $drive uuid=${uuid:-unknown}"
  # The user data's first line (what `server create --user-data` gave), if the drive has any.
  if [ -f /mnt/openstack/latest/user_data ]; then
    echo "ANVIL-TEST-IMAGE-USERDATA $(busybox head -n 1 /mnt/openstack/latest/user_data)"
  fi
else
  echo "ANVIL-TEST-IMAGE-CONFIGDRIVE none"
fi
busybox sync
busybox poweroff -f
EOF
  chmod 0755 "$initramfs/init"
  find "$initramfs" -exec touch -h -d "@$epoch" {} +
  (cd "$initramfs" && find . -mindepth 1 -print0 | sort -z | cpio -o -0 -H newc -R 0:0 --reproducible --quiet) |
    gzip -n -9 >"$work/initrd.img"

  install -m 0644 "$kernel_dir/vmlinuz" "$work/vmlinuz"
  cat >"$work/syslinux.cfg" <<EOF
SERIAL 0 115200
DEFAULT anvil
PROMPT 0
TIMEOUT 0
SAY Anvil test image $id: booting
LABEL anvil
  KERNEL /vmlinuz
  INITRD /initrd.img
  APPEND console=ttyS0,115200 quiet panic=-1
EOF
  touch -d "@$epoch" "$work/vmlinuz" "$work/initrd.img" "$work/syslinux.cfg"

  # The partition as its own file first: a FAT16 filesystem whose boot sector records the partition offset.
  part_sectors=$(((disk_mib * 1024 * 1024 / 512) - part_start))
  fat="$work/fat.img"
  truncate -s $((part_sectors * 512)) "$fat"
  mkfs.vfat -F 16 -n ANVILTEST -h "$part_start" --invariant "$fat" >/dev/null
  mcopy -m -i "$fat" "$work/vmlinuz" "$work/initrd.img" "$work/syslinux.cfg" ::/
  mmd -i "$fat" ::/EFI ::/EFI/BOOT
  install -m 0644 "$syslinux_efi" "$work/BOOTX64.EFI"
  install -m 0644 "$ldlinux_e64" "$work/ldlinux.e64"
  touch -d "@$epoch" "$work/BOOTX64.EFI" "$work/ldlinux.e64"
  mcopy -m -i "$fat" "$work/BOOTX64.EFI" "$work/ldlinux.e64" "$work/syslinux.cfg" ::/EFI/BOOT/
  syslinux --install "$fat"

  # The disk: an MBR partition table (fixed disk id), syslinux's boot code, and the partition at 1 MiB.
  truncate -s 0 "$work/disk.raw"
  truncate -s "${disk_mib}M" "$work/disk.raw"
  printf 'label: dos\nlabel-id: 0x414e5649\nstart=%s, size=%s, type=e, bootable\n' "$part_start" "$part_sectors" |
    sfdisk --quiet "$work/disk.raw"
  dd if="$syslinux_dir/mbr/mbr.bin" of="$work/disk.raw" bs=440 count=1 conv=notrunc status=none
  dd if="$fat" of="$work/disk.raw" bs=512 seek="$part_start" conv=notrunc,sparse status=none

  # The partition image: kernel and initrd under /boot of an ext4 filesystem built from a directory (mke2fs -d,
  # nothing mounted), with a fixed filesystem UUID tests can look for.
  mkdir -p "$work/rootfs/boot" "$work/rootfs/etc"
  cp "$work/vmlinuz" "$work/rootfs/boot/vmlinuz"
  cp "$work/initrd.img" "$work/rootfs/boot/initrd.img"
  echo "$id" >"$work/rootfs/etc/image-id"
  find "$work/rootfs" -exec touch -h -d "@$epoch" {} +
  truncate -s "${root_mib}M" "$work/root.ext4"
  E2FSPROGS_FAKE_TIME=$epoch mke2fs -q -F -t ext4 -L anvil-root -U "$root_uuid" -E "root_owner=0:0,hash_seed=$root_uuid" \
    -d "$work/rootfs" "$work/root.ext4"
  # mke2fs -d copies each file's ctime, which touch cannot set: pin them so two builds give the same bytes.
  (cd "$work/rootfs" && find . -mindepth 1 | sed 's|^\.||') | { echo /; cat; echo /lost+found; } |
    sed "s|.*|sif & ctime @$epoch|" | E2FSPROGS_FAKE_TIME=$epoch debugfs -w -f - "$work/root.ext4" >/dev/null

  # The whole-disk Linux image: the same files plus the image's own grub.cfg, in an ext4 root partition at 1 MiB.
  mkdir -p "$work/diskroot/boot/grub" "$work/diskroot/etc" "$work/diskroot/dev" "$work/diskroot/proc" "$work/diskroot/sys"
  cp "$work/vmlinuz" "$work/initrd.img" "$work/diskroot/boot/"
  echo "$id" >"$work/diskroot/etc/image-id"
  # grub-install and mdadm (GRUB asks `mdadm --detail` which array /boot is on; Ironic requires mdadm in
  # images for software RAID) with every library ldd lists, at the same paths; the modules GRUB installs.
  for bin in "$grub_install" "$mdadm"; do
    install -D -m 0755 "$bin" "$work/diskroot$bin"
    ldd "$bin" | awk '/=> \// {print $3} /^\t\// {print $1}' | while read -r lib; do
      install -D -m 0755 "$(realpath "$lib")" "$work/diskroot$lib"
    done
  done
  mkdir -p "$work/diskroot$grub_modules"
  cp -a "$grub_modules/." "$work/diskroot$grub_modules/"
  cat >"$work/diskroot/boot/grub/grub.cfg" <<GRUBCFG
# The image's own GRUB configuration.
set timeout=0
serial --unit=0 --speed=115200
terminal_input console serial
terminal_output console serial
insmod part_msdos
insmod ext2
search --no-floppy --fs-uuid --set=root $disk_root_uuid
menuentry "Anvil test image $id" {
  linux /boot/vmlinuz root=UUID=$disk_root_uuid ro console=ttyS0,115200 quiet panic=-1 anvil.grub_cfg=image
  initrd /boot/initrd.img
}
GRUBCFG
  find "$work/diskroot" -exec touch -h -d "@$epoch" {} +
  truncate -s "${root_mib}M" "$work/diskroot.ext4"
  E2FSPROGS_FAKE_TIME=$epoch mke2fs -q -F -t ext4 -L anvil-root -U "$disk_root_uuid" \
    -E "root_owner=0:0,hash_seed=$disk_root_uuid" -d "$work/diskroot" "$work/diskroot.ext4"
  (cd "$work/diskroot" && find . -mindepth 1 | sed 's|^\.||') | { echo /; cat; echo /lost+found; } |
    sed "s|.*|sif & ctime @$epoch|" | E2FSPROGS_FAKE_TIME=$epoch debugfs -w -f - "$work/diskroot.ext4" >/dev/null
  root_sectors=$((root_mib * 1024 * 1024 / 512))
  truncate -s $(((part_start + root_sectors) * 512)) "$work/linux-disk.raw"
  printf 'label: dos\nlabel-id: 0x414e564a\nstart=%s, size=%s, type=83\n' "$part_start" "$root_sectors" |
    sfdisk --quiet "$work/linux-disk.raw"
  dd if="$work/diskroot.ext4" of="$work/linux-disk.raw" bs=512 seek="$part_start" conv=notrunc,sparse status=none

  qemu-img convert -f raw -O qcow2 "$work/disk.raw" "$work/disk.qcow2"
  qemu-img convert -c -f raw -O qcow2 "$work/disk.raw" "$work/disk.compressed.qcow2"
  mv "$work/disk.raw" "$raw"
  mv "$work/disk.qcow2" "$qcow2"
  mv "$work/disk.compressed.qcow2" "$compressed"
  mv "$work/root.ext4" "$partition"
  mv "$work/linux-disk.raw" "$linux_disk"
  (cd "$out" && sha256sum "$id.raw" "$id.qcow2" "$id.compressed.qcow2" "$id.partition.raw" "$id.linux-disk.raw" >"$id.sha256sums")
  echo "$inputs" >"$stamp"
fi

finished=$(date +%s.%N)
mb() { awk -v b="$1" 'BEGIN {printf "%.1f MB", b / 1000000}'; }
echo "test image $id ($result) in $(awk -v a="$started" -v b="$finished" 'BEGIN {printf "%.1f", b - a}') s:"
for f in "$raw" "$qcow2" "$compressed" "$partition" "$linux_disk"; do
  echo "  $f  $(mb "$(stat -c %s "$f")") (on disk $(mb "$(($(stat -c %b "$f") * 512))"))"
done
