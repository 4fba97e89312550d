import { z } from "zod";
import { LldpRawSchema } from "./lldp.ts";

/**
 * The hardware inventory in ironic-python-agent's shape: same field names, units and types, so Ironic
 * tooling and inspection rules read it unchanged. Sizes are bytes unless the name says otherwise.
 */

export const InterfaceSchema = z.object({
  name: z.string(),
  mac_address: z.string(),
  ipv4_address: z.string().nullable(),
  ipv6_address: z.string().nullable(),
  has_carrier: z.boolean(),
  /** Deprecated in IPA (the lldp collector replaced it); kept for shape compatibility. */
  lldp: z.array(z.tuple([z.number().int(), z.string()])).nullable(),
  vendor: z.string().nullable(),
  product: z.string().nullable(),
  client_id: z.string().nullable(),
  biosdevname: z.string().nullable(),
  speed_mbps: z.number().int().nullable(),
  pci_address: z.string().nullable(),
  driver: z.string().nullable(),
});
export type Interface = z.infer<typeof InterfaceSchema>;

export const CpuSchema = z.object({
  model_name: z.string(),
  /** MHz, as a string (IPA takes it from lscpu). */
  frequency: z.string(),
  count: z.number().int().positive(),
  architecture: z.string(),
  flags: z.array(z.string()),
  socket_count: z.number().int().positive(),
});
export type Cpu = z.infer<typeof CpuSchema>;

export const DiskSchema = z.object({
  name: z.string(),
  model: z.string(),
  size: z.number().int().nonnegative(),
  rotational: z.boolean(),
  wwn: z.string().nullable(),
  serial: z.string().nullable(),
  vendor: z.string().nullable(),
  wwn_with_extension: z.string().nullable(),
  wwn_vendor_extension: z.string().nullable(),
  hctl: z.string().nullable(),
  by_path: z.string().nullable(),
  logical_sectors: z.number().int().nullable(),
  physical_sectors: z.number().int().nullable(),
  tran: z.string().nullable(),
});
export type Disk = z.infer<typeof DiskSchema>;

export const MemorySchema = z.object({
  /** Bytes usable by the OS (excludes kernel-reserved memory). */
  total: z.number().int().nonnegative(),
  /** MiB of installed memory (matches a flavor's RAM); null when unknown. */
  physical_mb: z.number().int().nonnegative().nullable(),
});
export type Memory = z.infer<typeof MemorySchema>;

export const SystemVendorSchema = z.object({
  product_name: z.string(),
  serial_number: z.string(),
  manufacturer: z.string(),
  firmware: z.object({ vendor: z.string(), version: z.string(), build_date: z.string() }),
});
export type SystemVendor = z.infer<typeof SystemVendorSchema>;

export const BootInfoSchema = z.object({
  current_boot_mode: z.enum(["uefi", "bios"]),
  /** The BOOTIF kernel parameter ("01-52-54-…"), null when the node did not PXE-boot. */
  pxe_interface: z.string().nullable(),
});
export type BootInfo = z.infer<typeof BootInfoSchema>;

export const InventorySchema = z.object({
  interfaces: z.array(InterfaceSchema),
  cpu: CpuSchema,
  disks: z.array(DiskSchema),
  memory: MemorySchema,
  /** "0.0.0.0" when no BMC address is configured, null when unknown. */
  bmc_address: z.string().nullable(),
  /** "::/0" when none is configured, null when unknown. */
  bmc_v6address: z.string().nullable(),
  bmc_mac: z.string().optional(),
  system_vendor: SystemVendorSchema,
  boot: BootInfoSchema,
  hostname: z.string(),
});
export type Inventory = z.infer<typeof InventorySchema>;

export const GIB = 1024 ** 3;

/** A disk with every optional field unknown; backends fill in what they find. */
export function blankDisk(name: string, size: number): Disk {
  return {
    name,
    model: "",
    size,
    rotational: false,
    wwn: null,
    serial: null,
    vendor: null,
    wwn_with_extension: null,
    wwn_vendor_extension: null,
    hctl: null,
    by_path: null,
    logical_sectors: null,
    physical_sectors: null,
    tran: null,
  };
}

/** IPA's pci-devices collector entry: ids as sysfs gives them, without "0x" (plugin_data `pci_devices`). */
export const PciDeviceSchema = z.object({
  vendor_id: z.string().max(8),
  product_id: z.string().max(8),
  /** The 24-bit class code, "030000" for a VGA controller. */
  class: z.string().max(8),
  revision: z.string().max(4).nullable(),
  /** The PCI address, "0000:00:02.0". */
  bus: z.string().max(32),
  /** As sysfs writes it ("-1" when the platform has no NUMA); IPA keeps the string. */
  numa_node_id: z.string().max(8).nullable(),
  /** Anvil's addition: what the class code names, for GPUs and accelerators ("GPU", "accelerator"); else null. */
  type: z.string().max(32).nullable().optional(),
});
export type PciDevice = z.infer<typeof PciDeviceSchema>;

/** IPA's numa-topology collector (plugin_data `numa_topology`). */
export const NumaTopologySchema = z.object({
  ram: z.array(z.object({ numa_node: z.number().int(), size_kb: z.number().int().nonnegative() })),
  cpus: z.array(
    z.object({
      cpu: z.number().int(),
      numa_node: z.number().int(),
      thread_siblings: z.array(z.number().int()),
    }),
  ),
  nics: z.array(z.object({ name: z.string(), numa_node: z.number().int() })),
});
export type NumaTopology = z.infer<typeof NumaTopologySchema>;

/**
 * One NIC's driver and firmware, as `ethtool -i` reports them (the ETHTOOL_GDRVINFO answer hardware's
 * extra-hardware collector reads too): plugin_data `nic_firmware`. A field the driver leaves empty is null
 * (virtual NICs have no firmware).
 */
export const NicFirmwareSchema = z.object({
  name: z.string().max(64),
  mac_address: z.string().max(64),
  driver: z.string().max(64).nullable(),
  driver_version: z.string().max(64).nullable(),
  firmware_version: z.string().max(64).nullable(),
  expansion_rom_version: z.string().max(64).nullable(),
  bus_info: z.string().max(64).nullable(),
  /** Where the fields came from: ethtool, or sysfs when there is no ethtool (no firmware version there). */
  source: z.enum(["ethtool", "sysfs"]),
});
export type NicFirmware = z.infer<typeof NicFirmwareSchema>;

/**
 * What IPA's inspection collectors add beside the inventory (Ironic stores it as plugin_data): each key is
 * optional, as a collector may be off or may fail.
 */
export const CollectorDataSchema = z.object({
  lldp_raw: LldpRawSchema.optional(),
  pci_devices: z.array(PciDeviceSchema).max(4096).optional(),
  numa_topology: NumaTopologySchema.nullable().optional(),
  nic_firmware: z.array(NicFirmwareSchema).max(1024).optional(),
});
export type CollectorData = z.infer<typeof CollectorDataSchema>;
