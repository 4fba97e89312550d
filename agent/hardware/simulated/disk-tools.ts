import type { Disk } from "../../../shared/inventory.ts";
import type { ExecResult } from "../../../shared/system/exec.ts";
import type { DiskCapabilities, DiskTools } from "../disk-tools.ts";
import { fileCapabilities, punchHole } from "../file-disk.ts";

/** A simulated machine's disks are files: discard punches holes; there is no drive firmware to ask. */
export class SimulatedDiskTools implements DiskTools {
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
}
