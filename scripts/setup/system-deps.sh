#!/usr/bin/env bash
# Installs the Debian packages the tests and the lab drive for real (ipmitool against ipmi_sim,
# QEMU with its iPXE ROM, dnsmasq, the stock baremetal CLI). Idempotent: installs only what is missing.
set -euo pipefail
packages=(
  python3-ironicclient python3-openstackclient
  # Real OpenStack clients as a test harness: Nova's Ironic virt driver (Zed) and the clients' functional
  # suites (ironicclient's needs tempest.lib and ddt; both run under Debian's pytest).
  python3-nova python3-openstacksdk python3-tempest python3-ddt python3-pytest
  # gophercloud's bare metal acceptance tests (Metal3's client), built offline from the packaged source.
  golang-go golang-github-gophercloud-gophercloud-dev
  ipmitool openipmi
  # FreeIPMI's ipmipower: the power status bench compares it with ipmitool and the native RMCP+ client.
  freeipmi-tools
  # The lab's Redfish BMC is checked by the Redfish library Ironic itself uses.
  python3-sushy
  # strace: a test checks which files ipmitool opens (it must skip the system's enterprise number registry).
  strace
  # The redfish-virtual-media boot builds its BIOS+UEFI ISOs with grub-mkrescue, which drives xorriso.
  xorriso
  qemu-system-x86 qemu-utils ipxe-qemu
  busybox-static dnsmasq-base iproute2 cpio kmod zstd xz-utils
  gdisk dosfstools genisoimage mtools util-linux fdisk time e2fsprogs
  # Tools the deploy ramdisk carries for the agent; the test images' bootloaders and UEFI firmware to boot them.
  mdadm nvme-cli hdparm smartmontools dmidecode syslinux syslinux-common syslinux-efi ovmf
  # LLDP: the ramdisk's agent captures frames with tcpdump; the lab's switch port is announced by lldpd.
  tcpdump lldpd
  # The ramdisk's NIC firmware collector reads ethtool -i.
  ethtool
  # The burn-in steps' tools (burnin_cpu/burnin_memory: stress-ng; burnin_disk/burnin_network: fio); the
  # loop-device tests run them for real.
  stress-ng fio
  # The ramdisk's fio is built from Debian's source with the optional engines off (images/fio/build.sh).
  gcc make libaio-dev zlib1g-dev
  # GRUB for install_bootloader (the ramdisk carries grub-install and its BIOS and UEFI platform files).
  grub2-common grub-pc-bin grub-efi-amd64-bin
  # Image tests (a self-signed HTTPS image server, bmaptool's block maps) and the image bench's curl | dd baseline.
  openssl curl bmap-tools
  # The image deploy bench can serve its images from nginx (sendfile, its own process), as deployments do.
  nginx-light
  # The dashboard's browser tests drive Debian's Chromium (nothing is downloaded at test time).
  chromium
  # The cluster store's tests, benches and lab start a throwaway server (scripts/setup/postgres.sh).
  postgresql
  # auth_strategy=keystone's tests start a throwaway Keystone (scripts/setup/keystone.sh) under uwsgi.
  keystone uwsgi-core uwsgi-plugin-python3
  # Glance image sources: a real glance-api on loopback (trusted-auth headers, file store, SQLite).
  glance-api
  # The secured lab's e2e captures loopback and dissects the TLS handshakes in the pcap.
  tshark
  # The arm64 ramdisk's e2e boots it under QEMU's aarch64 emulation (virt machine, direct kernel boot); its
  # agent build strips the official arm64 Node binary with binutils' cross strip.
  qemu-system-arm binutils-aarch64-linux-gnu
)
# The lab cloud's OpenStack services (Debian's Zed), installed with their own daemons held off.
bash "$(dirname "${BASH_SOURCE[0]}")/cloud.sh"
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
echo "system-deps: installing ${missing[*]}" >&2
bash "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh" "${missing[@]}"
