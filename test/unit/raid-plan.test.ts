import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { GIB, blankDisk } from "../../shared/inventory.ts";
import type { Disk } from "../../shared/inventory.ts";
import { LogicalDiskSchema, RaidConfigSchema } from "../../shared/raid.ts";
import type { LogicalDisk } from "../../shared/raid.ts";
import { memberBytesFor, planSoftwareRaid, RaidPlanError } from "../../agent/disk/raid/plan.ts";
import type { RaidPlan } from "../../agent/disk/raid/plan.ts";
import { partitionPath } from "../../agent/disk/raid/partition-path.ts";

const MIB = 1024 * 1024;

function disk(name: string, gib: number, extra: Partial<Disk> = {}): Disk {
  return { ...blankDisk(name, gib * GIB), ...extra };
}

const two = [disk("/dev/vda", 10, { serial: "V-A" }), disk("/dev/vdb", 10, { serial: "V-B" })];
const four = [
  ...two,
  disk("/dev/vdc", 10),
  disk("/dev/nvme0n1", 20, { serial: "NVME-1", rotational: false }),
];

function soft(fields: Partial<LogicalDisk> & Pick<LogicalDisk, "size_gb" | "raid_level">): LogicalDisk {
  return LogicalDiskSchema.parse({ controller: "software", ...fields });
}

/** No two partitions of a holder overlap, each is aligned and inside the usable area. */
function expectSane(plan: RaidPlan): void {
  for (const holder of plan.holders) {
    const sorted = [...holder.partitions].sort((a, b) => a.startBytes - b.startBytes);
    let end = MIB;
    for (const partition of sorted) {
      expect(partition.startBytes % MIB).toBe(0);
      expect(partition.sizeBytes % MIB).toBe(0);
      expect(partition.startBytes).toBeGreaterThanOrEqual(end);
      end = partition.startBytes + partition.sizeBytes;
    }
    expect(end).toBeLessThanOrEqual(holder.sizeBytes - MIB);
  }
}

describe("Ironic's RAID schema", () => {
  it("accepts a software RAID-1 with MAX and hint-shaped physical disks", () => {
    const parsed = RaidConfigSchema.safeParse({
      logical_disks: [
        {
          size_gb: "MAX",
          raid_level: "1",
          controller: "software",
          physical_disks: [{ serial: "V-A" }, "/dev/vdb"],
          is_root_volume: true,
        },
      ],
    });
    expect(parsed.success).toBe(true);
  });

  it.each([
    ["an empty list", { logical_disks: [] }],
    ["size_gb 0 (Ironic: exclusiveMinimum 0)", { logical_disks: [{ size_gb: 0, raid_level: "1" }] }],
    ["a level Ironic does not know", { logical_disks: [{ size_gb: 10, raid_level: "4" }] }],
    [
      "physical_disks without a controller",
      { logical_disks: [{ size_gb: 10, raid_level: "1", physical_disks: ["sda"] }] },
    ],
    ["an unknown field", { logical_disks: [{ size_gb: 10, raid_level: "1", stripe: 64 }] }],
    [
      "two root volumes",
      {
        logical_disks: [
          { size_gb: 10, raid_level: "1", is_root_volume: true },
          { size_gb: 10, raid_level: "0", is_root_volume: true },
        ],
      },
    ],
  ])("refuses %s", (_, config) => {
    expect(RaidConfigSchema.safeParse(config).success).toBe(false);
  });

  it("accepts Ironic's JBOD level and size_gb 'MAX'", () => {
    expect(
      RaidConfigSchema.safeParse({ logical_disks: [{ size_gb: "MAX", raid_level: "JBOD" }] }).success,
    ).toBe(true);
  });

  it("never throws on hostile shapes (property)", () => {
    let runs = 0;
    fc.assert(
      fc.property(fc.anything(), (value) => {
        runs++;
        const result = RaidConfigSchema.safeParse({ logical_disks: [value] });
        expect(typeof result.success).toBe("boolean");
      }),
      { numRuns: 500 },
    );
    console.log(`RaidConfigSchema: ${runs} hostile logical disks tried`);
  });
});

describe("partition names", () => {
  it.each([
    ["/dev/vda", 2, "/dev/vda2"],
    ["/dev/sdb", 1, "/dev/sdb1"],
    ["/dev/nvme0n1", 2, "/dev/nvme0n1p2"],
    ["/dev/loop3", 1, "/dev/loop3p1"],
    ["/dev/md0", 1, "/dev/md0p1"],
  ])("%s partition %i is %s", (diskName, number, path) => {
    expect(partitionPath(diskName, number)).toBe(path);
  });
});

describe("software RAID partition plans", () => {
  it("RAID-1 MAX over two disks: a BIOS boot partition then one RAID partition filling each disk", () => {
    const plan = planSoftwareRaid([soft({ size_gb: "MAX", raid_level: "1" })], two, { bootMode: "bios" });
    expectSane(plan);
    expect(plan.holders.map((h) => h.disk)).toEqual(["/dev/vda", "/dev/vdb"]);
    for (const holder of plan.holders) {
      expect(holder.partitions.map((p) => [p.number, p.role])).toEqual([
        [1, "bios_boot"],
        [2, "raid"],
      ]);
      expect(holder.partitions[0]).toMatchObject({ startBytes: MIB, sizeBytes: 2 * MIB });
      // Everything from 3 MiB to the last MiB (the backup GPT).
      expect(holder.partitions[1]).toMatchObject({ startBytes: 3 * MIB, sizeBytes: 10 * GIB - 4 * MIB });
    }
    expect(plan.arrays).toEqual([
      expect.objectContaining({
        device: "/dev/md0",
        level: "1",
        members: ["/dev/vda2", "/dev/vdb2"],
        holders: ["/dev/vda", "/dev/vdb"],
        isRoot: true,
      }),
    ]);
  });

  it("UEFI puts an EFI system partition on every holder", () => {
    const plan = planSoftwareRaid([soft({ size_gb: 4, raid_level: "1" })], two, { bootMode: "uefi" });
    expectSane(plan);
    for (const holder of plan.holders) {
      expect(holder.partitions[0]).toMatchObject({ role: "esp", number: 1, sizeBytes: 128 * MIB });
      expect(holder.partitions[1]).toMatchObject({ role: "raid", sizeBytes: 4 * GIB });
    }
  });

  it.each([
    ["1", 8, 2, 8],
    ["0", 8, 2, 4],
    ["1+0", 8, 4, 4],
    ["5", 9, 4, 3],
    ["6", 8, 4, 4],
  ] as const)("RAID-%s of %i GiB over %i disks takes %i GiB per member", (...[level, gib, members, per]) => {
    expect(memberBytesFor(level, gib * GIB, members)).toBe(per * GIB);
  });

  it("several logical disks share holders: fixed sizes first, MAX takes the rest, root is md0", () => {
    const plan = planSoftwareRaid(
      [
        soft({ size_gb: 2, raid_level: "0", volume_name: "scratch" }),
        soft({ size_gb: "MAX", raid_level: "1+0", volume_name: "data" }),
        soft({
          size_gb: 4,
          raid_level: "1",
          is_root_volume: true,
          physical_disks: ["vda", { serial: "V-B" }],
        }),
      ],
      four,
      { bootMode: "bios" },
    );
    expectSane(plan);
    expect(plan.arrays.map((a) => [a.device, a.name, a.level, a.isRoot])).toEqual([
      ["/dev/md0", undefined, "1", true],
      ["/dev/md1", "scratch", "0", false],
      ["/dev/md2", "data", "10", false],
    ]);
    const vda = plan.holders.find((h) => h.disk === "/dev/vda")!;
    // bios boot, scratch (2 GiB / 4 members), root (4 GiB), then MAX.
    expect(vda.partitions.map((p) => [p.number, p.logicalDisk, p.sizeBytes / MIB])).toEqual([
      [1, undefined, 2],
      [2, 0, 512],
      [3, 2, 4096],
      [4, 1, (10 * GIB - 4 * MIB - 512 * MIB - 4 * GIB) / MIB],
    ]);
    // MAX members are equal: the emptiest holder (vda/vdb, which also hold root) decides.
    const data = plan.arrays[2]!;
    // Without physical_disks: every disk, by name.
    expect(data.members).toEqual(["/dev/nvme0n1p3", "/dev/vda4", "/dev/vdb4", "/dev/vdc3"]);
    const sizes = plan.holders.flatMap((h) =>
      h.partitions.filter((p) => p.logicalDisk === 1).map((p) => p.sizeBytes),
    );
    expect(new Set(sizes).size).toBe(1);
  });

  it("number_of_physical_disks keeps the first N disks by name", () => {
    const plan = planSoftwareRaid(
      [soft({ size_gb: 1, raid_level: "1", number_of_physical_disks: 2 })],
      four,
      {
        bootMode: "bios",
      },
    );
    expect(plan.arrays[0]!.holders).toEqual(["/dev/nvme0n1", "/dev/vda"]);
  });

  it.each([
    [
      "RAID-1 with one disk",
      [soft({ size_gb: 1, raid_level: "1" })],
      [two[0]!],
      /RAID-1 needs at least 2 disks, got 1/,
    ],
    [
      "RAID-1+0 over two disks",
      [soft({ size_gb: 1, raid_level: "1+0" })],
      two,
      /RAID-1\+0 needs at least 4 disks, got 2/,
    ],
    ["RAID-5 over two disks", [soft({ size_gb: 1, raid_level: "5" })], two, /RAID-5 needs at least 3 disks/],
    [
      "RAID-6 over three disks",
      [soft({ size_gb: 1, raid_level: "6" })],
      four.slice(0, 3),
      /RAID-6 needs at least 4 disks/,
    ],
    [
      "a hint matching nothing",
      [soft({ size_gb: 1, raid_level: "1", physical_disks: [{ serial: "NOPE" }, "vdb"] })],
      two,
      /no disk matches physical disk \{"serial":"NOPE"\}/,
    ],
    [
      "the same disk twice",
      [soft({ size_gb: 1, raid_level: "1", physical_disks: ["vda", "vda"] })],
      two,
      /no disk matches physical disk "vda"/,
    ],
    [
      "a size that does not fit",
      [soft({ size_gb: 11, raid_level: "1" })],
      two,
      /needs 11264 MiB on \/dev\/vda, which has 10236 MiB left/,
    ],
    [
      "two MAX volumes on one disk",
      [soft({ size_gb: "MAX", raid_level: "1" }), soft({ size_gb: "MAX", raid_level: "0" })],
      two,
      /two logical disks with size_gb MAX share \/dev\/vda/,
    ],
    [
      "a level mdadm is not asked for",
      [soft({ size_gb: 1, raid_level: "5+0" })],
      four,
      /RAID level 5\+0 is not available for software RAID/,
    ],
    [
      "more disks asked for than exist",
      [soft({ size_gb: 1, raid_level: "1", number_of_physical_disks: 3 })],
      two,
      /number_of_physical_disks is 3 but only 2/,
    ],
  ] as const)("refuses %s with a clear error", (...[, logical, disks, message]) => {
    expect(() => planSoftwareRaid(logical, disks, { bootMode: "bios" })).toThrow(RaidPlanError);
    expect(() => planSoftwareRaid(logical, disks, { bootMode: "bios" })).toThrow(message);
  });

  it("any plan it returns fits its disks (property)", () => {
    let runs = 0;
    let plans = 0;
    const level = fc.constantFrom("0", "1", "1+0", "5", "6" as const);
    const size = fc.oneof(fc.integer({ min: 1, max: 12 }), fc.constant("MAX" as const));
    fc.assert(
      fc.property(
        fc.array(fc.record({ raid_level: level, size_gb: size }), { minLength: 1, maxLength: 4 }),
        fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 1, maxLength: 6 }),
        fc.constantFrom("bios", "uefi" as const),
        (logical, sizes, bootMode) => {
          runs++;
          const disks = sizes.map((gib, i) => disk(`/dev/vd${String.fromCharCode(97 + i)}`, gib));
          let plan: RaidPlan;
          try {
            plan = planSoftwareRaid(
              logical.map((l) => soft(l)),
              disks,
              { bootMode },
            );
          } catch (error) {
            expect(error).toBeInstanceOf(RaidPlanError);
            return;
          }
          plans++;
          expectSane(plan);
          expect(plan.arrays.filter((a) => a.isRoot)).toHaveLength(1);
          expect(plan.arrays[0]!.device).toBe("/dev/md0");
        },
      ),
      { numRuns: 400 },
    );
    console.log(`planSoftwareRaid: ${runs} random requests, ${plans} plans checked, the rest refused`);
  });
});
