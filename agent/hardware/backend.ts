import type { CollectorData, Disk, Inventory } from "../../shared/inventory.ts";
import type { BurninTools } from "./burnin-tools.ts";
import type { DiskTools } from "./disk-tools.ts";
import type { MdSystem } from "../disk/raid/md-system.ts";

/**
 * What the agent needs from the machine it runs on. `linux` reads the real machine; `simulated` serves a
 * JSON inventory whose disks are plain files, for tests and load generators.
 */
export interface HardwareBackend {
  readonly name: "linux" | "simulated";
  /** Probing and firmware/discard commands for erasing disks. */
  readonly diskTools: DiskTools;
  /** stress-ng and fio for the burn-in steps. */
  readonly burnin: BurninTools;
  /** The full inventory. @throws Error only when a required source (e.g. /proc/meminfo) is unreadable. */
  inventory(options?: { signal?: AbortSignal }): Promise<Inventory>;
  /**
   * What IPA's inspection collectors add beside the inventory (lldp_raw, pci_devices, numa_topology). Never
   * throws: a collector that fails leaves its key out. May take the LLDP listening time. Absent: none.
   */
  collectorData?(options?: { signal?: AbortSignal }): Promise<CollectorData>;
  /** Just the disks (cheaper than a full inventory; used to resolve root device hints). */
  disks(): Promise<Disk[]>;
  /** MAC addresses the conductor can look the node up by. */
  macs(): Promise<string[]>;
  /** The BMC's IPv4 address if the backend can tell, else null. */
  bmcAddress(): Promise<string | null>;
  /** Changes on every boot; the conductor ties the agent token to it. */
  bootId(): Promise<string>;
  /** Flushes filesystem buffers to disk. */
  sync(): Promise<void>;
  /** Reboots the machine now (the linux backend does not return). */
  reboot(): Promise<void>;
  /** Powers the machine off now (the linux backend does not return). */
  powerOff(): Promise<void>;
  /** Software RAID (md), where the machine has it; absent on the simulated backend (its disks are files). */
  readonly md?: MdSystem;
}
