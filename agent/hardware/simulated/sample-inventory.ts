import type { Inventory } from "../../../shared/inventory.ts";

export interface SimulatedMachineSpec {
  macs: readonly string[];
  /** Disk names are paths of plain files for the simulated backend. */
  disks: readonly { name: string; size: number; serial: string }[];
  cpus?: number;
  memoryMb?: number;
  bootMode?: "bios" | "uefi";
  hostname?: string;
}

/** An IPA-shaped inventory for a simulated machine (demos, scale runs, tests). The first MAC is the PXE one. */
export function simulatedInventory(spec: SimulatedMachineSpec): Inventory {
  const memoryMb = spec.memoryMb ?? 16384;
  return {
    interfaces: spec.macs.map((mac, index) => ({
      name: `eth${index}`,
      mac_address: mac,
      ipv4_address: index === 0 ? "192.0.2.20" : null,
      ipv6_address: null,
      has_carrier: index === 0,
      lldp: null,
      vendor: "0x1af4",
      product: "0x0001",
      client_id: null,
      biosdevname: null,
      speed_mbps: 10000,
      pci_address: `0000:00:0${3 + index}.0`,
      driver: "virtio_net",
    })),
    cpu: {
      model_name: "Simulated CPU",
      frequency: "3400.0000",
      count: spec.cpus ?? 8,
      architecture: "x86_64",
      flags: ["fpu", "vmx"],
      socket_count: 1,
    },
    disks: spec.disks.map((disk) => ({
      name: disk.name,
      model: "QEMU HARDDISK",
      size: disk.size,
      rotational: false,
      wwn: null,
      serial: disk.serial,
      vendor: "0x1af4",
      wwn_with_extension: null,
      wwn_vendor_extension: null,
      hctl: null,
      by_path: null,
      logical_sectors: 512,
      physical_sectors: 512,
      tran: "virtio",
    })),
    // the kernel keeps ~300 MiB for itself: total is what the OS sees, physical_mb what the flavor says
    memory: { total: (memoryMb - 300) * 1024 * 1024, physical_mb: memoryMb },
    bmc_address: "127.0.0.1",
    bmc_v6address: null,
    system_vendor: {
      product_name: "Standard PC (Q35 + ICH9, 2009)",
      serial_number: "SIM-SERIAL",
      manufacturer: "QEMU",
      firmware: { vendor: "SeaBIOS", version: "1.16.2", build_date: "04/01/2014" },
    },
    boot: {
      current_boot_mode: spec.bootMode ?? "bios",
      pxe_interface: spec.macs[0] ? `01-${spec.macs[0].replaceAll(":", "-")}` : null,
    },
    hostname: spec.hostname ?? "sim-node",
  };
}
