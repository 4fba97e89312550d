#!/bin/sh
# The lab BMC's hook: chassis-control runs it as `vm-hook.sh KEY VALUE` after every chassis change, with
# ANVIL_SIM_CHASSIS=<node>/bmc/chassis. It turns power on/off, reset and soft off into QEMU actions.
# ipmi_sim waits for it (and ipmitool retransmits after 1 s, which repeats the command), so it never waits
# for a guest; QEMU runs detached under vm-run.sh. Every action that changed the machine is logged to
# vm/hook.log as "<ms> <key> <what>": that log, not the BMC's event list, says how often the node was
# really switched (a retransmitted command finds the machine already in the wanted state).
set -u
chassis=$ANVIL_SIM_CHASSIS
node=${chassis%/bmc/chassis}
vm=$node/vm
here=$(dirname "$0")
key=$1
value=$2

now() { date +%s%3N; }
log() { echo "$(now) $*" >>"$vm/hook.log"; }
# A zombie counts as gone: our detached children are reaped by PID 1, which may take its time.
alive() { kill -0 "$1" 2>/dev/null && [ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)" != Z ]; }
running() { [ -s "$vm/qemu.pid" ] && alive "$(cat "$vm/qemu.pid")"; }
set_power() { echo "$1" >"$chassis/power.tmp" && mv "$chassis/power.tmp" "$chassis/power"; }

# The boot device picks QEMU's boot order: the NIC's iPXE ROM for pxe, the first disk otherwise.
boot_order() {
  case "$(cat "$chassis/boot")" in
    pxe) echo n ;;
    *) echo c ;;
  esac
}

# HMP over the monitor's unix socket (busybox nc has no unix sockets; node is always there).
monitor() {
  node -e '
    const s = require("net").connect(process.argv[1], () => s.end(process.argv[2] + "\n"));
    s.on("data", () => {});
    s.on("error", () => process.exit(1));
    s.on("close", () => process.exit(0));
    setTimeout(() => process.exit(1), 3000).unref();
  ' "$vm/monitor.sock" "$1"
}

start_vm() {
  if running; then
    log "$key already-on"
    return
  fi
  generation=$(now)
  echo "$generation" >"$vm/generation"
  order=$(boot_order)
  echo "$order" >"$vm/boot-order"
  rm -f "$vm/qemu.pid"
  setsid sh "$here/vm-run.sh" "$vm" "$chassis" "$order" "$generation" </dev/null >>"$vm/qemu.log" 2>&1 &
  echo $! >"$vm/supervisor.pid"
  log "$key start order=$order"
  # Wait for QEMU's pidfile, so a power off right after this finds the VM.
  i=0
  while [ ! -s "$vm/qemu.pid" ] && [ $i -lt 100 ]; do
    sleep 0.1
    i=$((i + 1))
  done
}

# A hard power off: SIGKILL, like pulling the plug (what the guest had not flushed is lost, as on metal).
stop_vm() {
  supervisor=$(cat "$vm/supervisor.pid" 2>/dev/null || echo 0)
  if ! running; then
    log "$key already-off"
    return
  fi
  kill -9 "$(cat "$vm/qemu.pid")" 2>/dev/null
  i=0
  while [ "$supervisor" -gt 0 ] && alive "$supervisor" && [ $i -lt 50 ]; do
    sleep 0.1
    i=$((i + 1))
  done
  log "$key stop"
}

case "$key" in
  power)
    if [ "$value" = 1 ]; then start_vm; else stop_vm; fi
    ;;
  reset)
    # A reset keeps the VM when the boot order still holds; otherwise QEMU restarts with the new one.
    if running && [ "$(cat "$vm/boot-order" 2>/dev/null)" = "$(boot_order)" ]; then
      monitor system_reset && log "reset system_reset"
    else
      stop_vm
      set_power 1
      start_vm
    fi
    ;;
  shutdown)
    # ACPI power button: the guest decides; the power stays on until QEMU exits (vm-run.sh records it).
    if running; then
      set_power 1
      monitor system_powerdown && log "shutdown acpi-powerdown"
    fi
    ;;
  *) ;;
esac
exit 0
