import { z } from "zod";

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
