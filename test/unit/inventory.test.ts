import { describe, expect, it } from "vitest";
import { InventorySchema } from "../../shared/inventory.ts";
import type { Inventory } from "../../shared/inventory.ts";

/** A trimmed IPA inventory, shaped like the reference. */
const IPA_INVENTORY: Inventory = {
  interfaces: [
    {
      name: "eth0",
      mac_address: "52:54:00:90:35:d6",
      ipv4_address: "192.168.122.128",
      ipv6_address: "fe80::5054:ff:fe90:35d6%eth0",
      has_carrier: true,
      lldp: [[1, "04525400903d6"]],
      vendor: "0x1af4",
      product: "0x0001",
      client_id: null,
      biosdevname: null,
      speed_mbps: 10000,
      pci_address: "0000:00:03.0",
      driver: "virtio_net",
    },
  ],
  cpu: {
    model_name: "Intel Xeon",
    frequency: "3400.0000",
    count: 64,
    architecture: "x86_64",
    flags: ["vmx"],
    socket_count: 2,
  },
  disks: [
    {
      name: "/dev/sda",
      model: "SSD",
      size: 480103981056,
      rotational: false,
      wwn: "0x5000",
      serial: "S1",
      vendor: "ATA",
      wwn_with_extension: "0x5000",
      wwn_vendor_extension: null,
      hctl: "0:0:0:0",
      by_path: "/dev/disk/by-path/pci-0000:00:1f.2-ata-1",
      logical_sectors: 512,
      physical_sectors: 4096,
      tran: "sata",
    },
  ],
  memory: { total: 270100000000, physical_mb: 262144 },
  bmc_address: "192.0.2.10",
  bmc_v6address: "::/0",
  system_vendor: {
    product_name: "PowerEdge",
    serial_number: "ABC",
    manufacturer: "Dell",
    firmware: { vendor: "Dell", version: "2.1", build_date: "01/01/2024" },
  },
  boot: { current_boot_mode: "uefi", pxe_interface: "01-52-54-00-90-35-d6" },
  hostname: "localhost",
};

describe("InventorySchema", () => {
  it("accepts IPA's inventory shape", () => {
    expect(InventorySchema.parse(IPA_INVENTORY)).toEqual(IPA_INVENTORY);
  });

  it("keeps cpu.frequency a string in MHz, as IPA", () => {
    const wrong = { ...IPA_INVENTORY, cpu: { ...IPA_INVENTORY.cpu, frequency: 3400 } };
    expect(InventorySchema.safeParse(wrong).success).toBe(false);
  });

  it("requires disk sizes in whole bytes", () => {
    const wrong = { ...IPA_INVENTORY, disks: [{ ...IPA_INVENTORY.disks[0], size: 447.1 }] };
    expect(InventorySchema.safeParse(wrong).success).toBe(false);
  });

  it("allows a null BMC address (unknown) but not a missing one", () => {
    expect(InventorySchema.safeParse({ ...IPA_INVENTORY, bmc_address: null }).success).toBe(true);
    const { bmc_address: _omit, ...missing } = IPA_INVENTORY;
    expect(InventorySchema.safeParse(missing).success).toBe(false);
  });

  it("only knows the two boot modes", () => {
    const wrong = { ...IPA_INVENTORY, boot: { current_boot_mode: "legacy", pxe_interface: null } };
    expect(InventorySchema.safeParse(wrong).success).toBe(false);
  });
});
