import { blankDisk, type Disk, type Interface, type Inventory } from "../../../shared/inventory.ts";
import type { CallOptions, DriverNode } from "../out-of-band.ts";
import type { OutOfBandInspectInterface } from "../interfaces.ts";
import type { RedfishClient, RedfishConnections } from "./client.ts";
import {
  CollectionSchema,
  DriveSchema,
  EthernetInterfaceSchema,
  MemoryModuleSchema,
  ProcessorSchema,
  SimpleStorageSchema,
  StorageSchema,
  type ComputerSystem,
  type Drive,
  type EthernetInterface,
  type Processor,
} from "./schemas.ts";
import { loadSystem } from "./system.ts";
import type { z } from "zod";

const MIB = 1024 * 1024;
const MAC = /^([0-9a-f]{2}:){5}[0-9a-f]{2}$/;
// a BMC could list thousands of members: inspection reads at most this many of each kind
const MAX_MEMBERS = 256;

/** What out-of-band inspection read from the service, before it becomes an inventory. */
export interface RedfishHardware {
  system: ComputerSystem;
  processors: Processor[];
  memoryMiB: number[];
  drives: Drive[];
  simpleDevices: z.infer<typeof SimpleStorageSchema>["Devices"];
  nics: EthernetInterface[];
}

/** Redfish's ProcessorArchitecture/InstructionSet → the kernel's name (what IPA reports). */
export function architectureOf(processor: Processor | undefined): string {
  switch (processor?.InstructionSet ?? "") {
    case "x86-64":
      return "x86_64";
    case "x86":
      return "i686";
    case "ARM-A64":
      return "aarch64";
    case "ARM-A32":
      return "armv7l";
    case "PowerISA":
      return "ppc64le";
    default:
      return processor?.ProcessorArchitecture === "ARM" ? "aarch64" : "x86_64";
  }
}

/** A MAC in lower-case colon form, or null for anything else. */
export function normaliseMac(value: string | null | undefined): string | null {
  const mac = (value ?? "").trim().toLowerCase().replace(/-/g, ":");
  return MAC.test(mac) && mac !== "00:00:00:00:00:00" ? mac : null;
}

function diskOf(
  drive: { Name?: string | null; Id?: string; Model?: string | null; CapacityBytes?: number | null },
  index: number,
): Disk {
  return blankDisk(drive.Id ?? drive.Name ?? `disk${index}`, drive.CapacityBytes ?? 0);
}

/** The inventory (IPA's shape, as in-band inspection stores it) from what the service reported. Pure. */
export function inventoryFromRedfish(hw: RedfishHardware): Inventory {
  const { system } = hw;
  const cpuProcessors = hw.processors.filter((p) => (p.ProcessorType ?? "CPU") === "CPU");
  const first = cpuProcessors[0];
  const threads = cpuProcessors.reduce((sum, p) => sum + (p.TotalThreads ?? p.TotalCores ?? 0), 0);
  const count =
    system.ProcessorSummary?.LogicalProcessorCount ??
    (threads > 0 ? threads : (system.ProcessorSummary?.Count ?? 1));
  const summedMiB = hw.memoryMiB.reduce((sum, m) => sum + m, 0);
  const summaryGiB = system.MemorySummary?.TotalSystemMemoryGiB;
  const reportedMb =
    summedMiB > 0
      ? Math.round(summedMiB)
      : summaryGiB !== undefined && summaryGiB !== null
        ? Math.round(summaryGiB * 1024)
        : null;
  // a size whose bytes no JSON integer holds exactly (8 EiB and up) is no machine's: unknown, not a bad inventory
  const physicalMb = reportedMb !== null && reportedMb * MIB <= Number.MAX_SAFE_INTEGER ? reportedMb : null;
  const disks: Disk[] = hw.drives.map((drive, i) => ({
    ...diskOf(drive, i),
    model: drive.Model ?? "",
    rotational: drive.MediaType === "HDD",
    serial: drive.SerialNumber ?? null,
    vendor: drive.Manufacturer ?? null,
    tran: drive.Protocol ? drive.Protocol.toLowerCase() : null,
  }));
  for (const [i, device] of (hw.simpleDevices ?? []).entries()) {
    if (!device.CapacityBytes) continue;
    disks.push({
      ...diskOf({ Name: device.Name, CapacityBytes: device.CapacityBytes }, disks.length + i),
      model: device.Model ?? "",
      vendor: device.Manufacturer ?? null,
    });
  }
  const interfaces: Interface[] = [];
  for (const nic of hw.nics) {
    const mac = normaliseMac(nic.PermanentMACAddress) ?? normaliseMac(nic.MACAddress);
    if (!mac) continue;
    interfaces.push({
      name: nic.Id ?? nic.Name ?? mac,
      mac_address: mac,
      ipv4_address: nic.IPv4Addresses?.find((a) => a.Address)?.Address ?? null,
      ipv6_address: nic.IPv6Addresses?.find((a) => a.Address)?.Address ?? null,
      has_carrier: nic.LinkStatus === "LinkUp",
      lldp: null,
      vendor: null,
      product: null,
      client_id: null,
      biosdevname: null,
      speed_mbps: nic.SpeedMbps ?? null,
      pci_address: null,
      driver: null,
    });
  }
  return {
    interfaces,
    cpu: {
      model_name: first?.Model ?? system.ProcessorSummary?.Model ?? "",
      frequency: first?.MaxSpeedMHz ? String(first.MaxSpeedMHz) : "",
      count: Math.max(1, count),
      architecture: architectureOf(first),
      flags: [],
      socket_count: Math.max(1, cpuProcessors.length || (system.ProcessorSummary?.Count ?? 1)),
    },
    disks,
    memory: { total: (physicalMb ?? 0) * MIB, physical_mb: physicalMb },
    bmc_address: null,
    bmc_v6address: null,
    system_vendor: {
      product_name: system.Model ?? "",
      serial_number: system.SerialNumber ?? "",
      manufacturer: system.Manufacturer ?? "",
      firmware: { vendor: "", version: system.BiosVersion ?? "", build_date: "" },
    },
    boot: {
      current_boot_mode: system.Boot?.BootSourceOverrideMode === "UEFI" ? "uefi" : "bios",
      pxe_interface: null,
    },
    hostname: system.HostName ?? "",
  };
}

async function members<T>(
  client: RedfishClient,
  collection: string | undefined,
  read: { schema: z.ZodType<T>; signal?: AbortSignal },
): Promise<T[]> {
  const { schema, signal } = read;
  if (!collection) return [];
  const list = (await client.get(collection, CollectionSchema, signal)).Members.slice(0, MAX_MEMBERS);
  const out: T[] = [];
  for (const member of list) out.push(await client.get(member["@odata.id"], schema, signal));
  return out;
}

/** Out-of-band inspection through Redfish (Ironic's redfish inspect interface). */
export class RedfishInspect implements OutOfBandInspectInterface {
  readonly name = "redfish";
  readonly inBand = false;

  constructor(private readonly connections: RedfishConnections) {}

  /** Reads Systems, Processors, Memory, Storage (or SimpleStorage) and EthernetInterfaces. @throws RedfishError */
  async inspectHardware(node: DriverNode, options: CallOptions = {}): Promise<Inventory> {
    const { client, system } = await loadSystem(this.connections, node, options.signal);
    const { signal } = options;
    const storages = await members(client, system.Storage?.["@odata.id"], { schema: StorageSchema, signal });
    const drives: Drive[] = [];
    for (const storage of storages) {
      for (const link of (storage.Drives ?? []).slice(0, MAX_MEMBERS))
        drives.push(await client.get(link["@odata.id"], DriveSchema, signal));
    }
    const simple =
      drives.length > 0
        ? []
        : await members(client, system.SimpleStorage?.["@odata.id"], { schema: SimpleStorageSchema, signal });
    return inventoryFromRedfish({
      system,
      processors: await members(client, system.Processors?.["@odata.id"], {
        schema: ProcessorSchema,
        signal,
      }),
      memoryMiB: (await members(client, system.Memory?.["@odata.id"], { schema: MemoryModuleSchema, signal }))
        .filter((m) => m.Status?.State !== "Absent")
        .map((m) => m.CapacityMiB ?? 0),
      drives,
      simpleDevices: simple.flatMap((s) => s.Devices ?? []),
      nics: await members(client, system.EthernetInterfaces?.["@odata.id"], {
        schema: EthernetInterfaceSchema,
        signal,
      }),
    });
  }
}
