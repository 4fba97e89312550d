import { describe, expect, it } from "vitest";
import { GIB, blankDisk } from "../../shared/inventory.ts";
import type { Disk } from "../../shared/inventory.ts";
import { RootDeviceHintsSchema, matchesHints, selectRootDevice } from "../../shared/root-device.ts";

function disk(name: string, gib: number, extra: Partial<Disk> = {}): Disk {
  return { ...blankDisk(name, gib * GIB), ...extra };
}

const disks: Disk[] = [
  disk("/dev/sda", 500, {
    model: "Samsung SSD 870",
    vendor: "ATA",
    serial: "S5SSNF0R123",
    rotational: false,
    hctl: "0:0:0:0",
    wwn: "0x5002538f4123abcd",
  }),
  disk("/dev/sdb", 2000, {
    model: "ST2000DM008",
    vendor: "ATA",
    serial: "ZFL0ABCD",
    rotational: true,
    hctl: "1:0:0:0",
    by_path: "/dev/disk/by-path/pci-0000:00:1f.2-ata-2",
  }),
  disk("/dev/nvme0n1", 960, { model: "INTEL SSDPE2KX010T8", serial: "PHLJ912345", rotational: false }),
  disk("/dev/sdc", 2, { model: "USB stick", rotational: false }),
];

describe("selectRootDevice without hints", () => {
  it("picks the smallest disk of at least 4 GiB (IPA's default)", () => {
    expect(selectRootDevice(disks)?.name).toBe("/dev/sda");
  });

  it("returns null when every disk is under 4 GiB", () => {
    expect(selectRootDevice([disk("/dev/sdz", 3)])).toBeNull();
  });

  it("treats empty hints as no hints", () => {
    expect(selectRootDevice(disks, {})?.name).toBe("/dev/sda");
  });
});

describe("selectRootDevice with hints", () => {
  it.each([
    [{ name: "/dev/sdb" }, "/dev/sdb"],
    [{ name: "sdb" }, "/dev/sdb"],
    [{ serial: "phlj912345" }, "/dev/nvme0n1"],
    [{ model: "<in> ssdpe2" }, "/dev/nvme0n1"],
    [{ model: "s!= Samsung SSD 870", rotational: false }, "/dev/nvme0n1"],
    [{ wwn: "0x5002538F4123ABCD" }, "/dev/sda"],
    [{ hctl: "1:0:0:0" }, "/dev/sdb"],
    [{ by_path: "pci-0000:00:1f.2-ata-2" }, "/dev/sdb"],
    [{ rotational: true }, "/dev/sdb"],
    [{ rotational: "false", size: "> 600" }, "/dev/nvme0n1"],
    [{ size: 960 }, "/dev/nvme0n1"],
    [{ size: "== 2000" }, "/dev/sdb"],
    [{ size: ">= 1000" }, "/dev/sdb"],
    [{ size: "<= 2" }, "/dev/sdc"],
    [{ size: "<or> 1 <or> 960" }, "/dev/nvme0n1"],
    [{ serial: "<or> nope <or> zfl0abcd" }, "/dev/sdb"],
    [{ model: "s== samsung ssd 870" }, "/dev/sda"],
  ])("%j picks %s", (hints, expected) => {
    expect(selectRootDevice(disks, RootDeviceHintsSchema.parse(hints))?.name).toBe(expected);
  });

  it("requires every hint to match", () => {
    expect(selectRootDevice(disks, { rotational: true, size: "< 1000" })).toBeNull();
  });

  it("never matches a hint on an unknown field", () => {
    expect(matchesHints(disk("/dev/vda", 10), { serial: "x" })).toBe(false);
  });

  it("throws on an unparsable size or boolean", () => {
    expect(() => selectRootDevice(disks, { size: ">= lots" })).toThrow(/size/);
    expect(() => selectRootDevice(disks, { rotational: "maybe" })).toThrow(/rotational/);
  });

  it("rejects unknown hint names at the schema", () => {
    expect(RootDeviceHintsSchema.safeParse({ colour: "red" }).success).toBe(false);
  });
});
