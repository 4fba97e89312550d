#!/bin/sh
# Runs one power-on of a lab VM in the foreground (started detached by vm-hook.sh): QEMU with the node's
# argv and the boot order, then records power off when the guest (or a kill) ends it.
set -u
vm=$1
chassis=$2
order=$3
generation=$4
set --
# Booting from disk, the root disk (drive d0) is the one SeaBIOS boots: without a bootindex it boots the disk
# whose controller it finished setting up first, and an NVMe disk beats a root disk behind a SAS/RAID HBA.
while IFS= read -r arg; do
  case "$order,$arg" in
    c,*,drive=d0 | c,*,drive=d0,*) arg="$arg,bootindex=1" ;;
  esac
  set -- "$@" "$arg"
done <"$vm/qemu.args"
# `lab up --capture`: every frame on the node's NIC, one pcap per power-on (QEMU truncates its file).
if [ -e "$vm/capture-nic" ]; then
  set -- "$@" -object "filter-dump,id=nicdump,netdev=n0,file=$vm/nic-$generation.pcap"
fi
qemu-system-x86_64 "$@" -boot "order=$order" -pidfile "$vm/qemu.pid"
code=$?
echo "$(date +%s%3N) exited $code" >>"$vm/hook.log"
# Only this power-on's end counts: a later power on has a new generation.
if [ "$(cat "$vm/generation")" = "$generation" ]; then
  echo 0 >"$chassis/power.tmp" && mv "$chassis/power.tmp" "$chassis/power"
fi
