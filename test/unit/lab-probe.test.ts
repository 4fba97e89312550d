import { describe, expect, it } from "vitest";
import { countPowerActions } from "../../scripts/lab/probe.ts";
import { startToAgent } from "../../scripts/lab/walk.ts";
import { labVmArgs } from "../../scripts/lab/vm-args.ts";

describe("lab power accounting", () => {
  it("counts only actions that changed the machine, not retransmitted commands", () => {
    const log = [
      "1000 power start order=n",
      "1500 power already-on", // ipmitool retransmitted: the BMC ran the command again
      "9000 exited 0",
      "9100 power stop",
      "9200 power already-off",
      "9300 reset start order=c",
      "9400 reset system_reset",
      "9500 shutdown acpi-powerdown",
    ];
    expect(countPowerActions(log)).toEqual({ on: 1, off: 1, reset: 2, softOff: 1 });
  });

  it("pairs each network boot with the agent connect before the next start", () => {
    const at = (ms: number): string => new Date(ms).toISOString();
    const starts = [
      { at: 1_000, order: "n" },
      { at: 50_000, order: "c" }, // the instance: no agent
      { at: 90_000, order: "n" }, // a ramdisk whose agent never connected
      { at: 200_000, order: "n" },
    ];
    const events = [
      { type: "agent", node: "x", at: at(21_000), connected: true },
      { type: "agent", node: "x", at: at(40_000), connected: false },
      { type: "agent", node: "x", at: at(230_000), connected: true },
    ];
    expect(startToAgent(starts, events)).toEqual([20_000, 30_000]);
  });
});

describe("lab VM argv", () => {
  it("keeps the guest on a restricted slirp network that reaches only the conductor", () => {
    const argv = labVmArgs({
      dir: "/lab/vm",
      name: "lab-01",
      mac: "52:54:00:a0:00:01",
      memoryMb: 768,
      vcpus: 1,
      disks: [{ file: "/lab/vm/d.qcow2", bus: "nvme", serial: "LAB01-NVME" }],
      conductorPort: 6385,
    });
    const netdev = argv[argv.indexOf("-netdev") + 1] ?? "";
    expect(netdev).toContain("restrict=on");
    expect(netdev).toContain("guestfwd=tcp:10.0.2.100:80-cmd:busybox nc 127.0.0.1 6385");
    expect(argv).toContain("tcg");
    expect(argv).toContain("virtio-net-pci,netdev=n0,mac=52:54:00:a0:00:01");
    expect(argv).toContain("nvme,drive=d0,serial=LAB01-NVME");
    expect(argv).not.toContain("-boot"); // the BMC's boot device adds it at each power on
  });
});
