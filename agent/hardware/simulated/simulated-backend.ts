import { randomUUID } from "node:crypto";
import { appendFile, readFile } from "node:fs/promises";
import { z } from "zod";
import { InventorySchema } from "../../../shared/inventory.ts";
import { CollectorDataSchema } from "../../../shared/inventory.ts";
import type { CollectorData, Disk, Inventory } from "../../../shared/inventory.ts";
import type { HardwareBackend } from "../backend.ts";
import { SimulatedBurninTools, type SimulatedBurnin } from "./burnin-tools.ts";
import { SimulatedDiskTools } from "./disk-tools.ts";

const BurninPart = z.enum(["cpu", "memory", "disk", "disk-stall", "network"]);

/** A simulated machine file: a bare inventory, or an inventory with a fixed boot id. */
export const SimulatedMachineSchema = z.union([
  z.object({
    inventory: InventorySchema,
    boot_id: z.string().optional(),
    /** Disks (names from the inventory) whose SMART health check reports failing. */
    smart_failing: z.array(z.string()).optional(),
    /** What the inspection collectors report (lldp_raw, pci_devices, numa_topology); none when absent. */
    collector_data: CollectorDataSchema.optional(),
    /** Burn-in steps (cpu, memory, disk, network) whose tools report errors. */
    burnin_failing: z.array(BurninPart).optional(),
  }),
  InventorySchema.transform((inventory) => ({
    inventory,
    boot_id: undefined,
    smart_failing: undefined,
    burnin_failing: undefined,
  })),
]);

export type PowerEvent = "sync" | "reboot" | "power_off";

export interface SimulatedBackendOptions {
  inventory: Inventory;
  /** Defaults to a fresh UUID: one simulated boot per agent process. */
  bootId?: string;
  /** Disks whose SMART health check reports failing. */
  smartFailing?: readonly string[] | undefined;
  /** What the inspection collectors report; {} when absent. */
  collectorData?: CollectorData | undefined;
  /** Burn-in steps whose tools report errors. */
  burninFailing?: readonly SimulatedBurnin[] | undefined;
  /** Power events are appended here as JSON lines, so a test in another process can see them. */
  eventsFile?: string;
}

/**
 * A machine described by a JSON inventory. Its disks' names are paths of plain files, so commands that
 * write disks work on them unchanged; reboot and power off are only recorded.
 */
export class SimulatedBackend implements HardwareBackend {
  readonly name = "simulated";
  readonly diskTools: SimulatedDiskTools;
  readonly burnin: SimulatedBurninTools;
  readonly events: PowerEvent[] = [];
  private readonly id: string;

  constructor(private readonly options: SimulatedBackendOptions) {
    this.id = options.bootId ?? randomUUID();
    this.diskTools = new SimulatedDiskTools(new Set(options.smartFailing ?? []));
    this.burnin = new SimulatedBurninTools(new Set(options.burninFailing ?? []));
  }

  /** @throws Error when the file is unreadable or does not hold a valid inventory. */
  static async fromFile(path: string, options: { eventsFile?: string } = {}): Promise<SimulatedBackend> {
    const parsed = SimulatedMachineSchema.safeParse(JSON.parse(await readFile(path, "utf8")));
    if (!parsed.success) {
      throw new Error(`${path}: not a simulated machine: ${z.prettifyError(parsed.error)}`);
    }
    return new SimulatedBackend({
      inventory: parsed.data.inventory,
      bootId: parsed.data.boot_id,
      smartFailing: parsed.data.smart_failing,
      collectorData: "collector_data" in parsed.data ? parsed.data.collector_data : undefined,
      burninFailing: parsed.data.burnin_failing,
      eventsFile: options.eventsFile,
    });
  }

  async inventory(): Promise<Inventory> {
    return structuredClone(this.options.inventory);
  }

  async collectorData(): Promise<CollectorData> {
    return structuredClone(this.options.collectorData ?? {});
  }

  async disks(): Promise<Disk[]> {
    return structuredClone(this.options.inventory.disks);
  }

  async macs(): Promise<string[]> {
    return this.options.inventory.interfaces.map((item) => item.mac_address.toLowerCase());
  }

  async bmcAddress(): Promise<string | null> {
    return this.options.inventory.bmc_address;
  }

  async bootId(): Promise<string> {
    return this.id;
  }

  async sync(): Promise<void> {
    await this.record("sync");
  }

  async reboot(): Promise<void> {
    await this.record("reboot");
  }

  async powerOff(): Promise<void> {
    await this.record("power_off");
  }

  private async record(event: PowerEvent): Promise<void> {
    this.events.push(event);
    if (this.options.eventsFile !== undefined) {
      await appendFile(this.options.eventsFile, JSON.stringify({ event, ts: Date.now() }) + "\n");
    }
  }
}
