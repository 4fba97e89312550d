import type { Disk } from "../../../shared/inventory.ts";
import type { ExecResult } from "../../../shared/system/exec.ts";
import type { DiskCapabilities, DiskTools } from "../disk-tools.ts";
import { fileCapabilities, punchHole } from "../file-disk.ts";

/** smartctl's exit status bit 3: "SMART status check returned DISK FAILING". */
const DISK_FAILING = 1 << 3;

/**
 * A simulated machine's disks are files: discard punches holes; there is no drive firmware to ask, except
 * SMART health, which answers as `smartctl -H -j` would: passed, or failing for the disks the machine file
 * marks so (`smart_failing`).
 */
export class SimulatedDiskTools implements DiskTools {
  constructor(private readonly smartFailing: ReadonlySet<string> = new Set()) {}

  capabilities(disk: Disk): Promise<DiskCapabilities> {
    return fileCapabilities(disk);
  }

  discard(device: string, options: { signal?: AbortSignal }): Promise<void> {
    return punchHole(device, options.signal);
  }

  nvme(): Promise<ExecResult> {
    return Promise.reject(new Error("a simulated machine has no NVMe controller"));
  }

  hdparm(): Promise<ExecResult> {
    return Promise.reject(new Error("a simulated machine has no ATA drive"));
  }

  async smartctl(args: readonly string[]): Promise<ExecResult> {
    const device = args.at(-1) ?? "";
    const passed = !this.smartFailing.has(device);
    const report = {
      json_format_version: [1, 0],
      smartctl: { exit_status: passed ? 0 : DISK_FAILING },
      device: { name: device, type: "simulated" },
      smart_status: { passed },
    };
    return { code: report.smartctl.exit_status, signal: null, stdout: JSON.stringify(report), stderr: "" };
  }
}
