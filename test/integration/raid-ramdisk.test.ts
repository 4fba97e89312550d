import { createHash } from "node:crypto";
import { open, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exec } from "../../shared/system/exec.ts";
import { CreatedRaidConfigSchema } from "../../shared/raid.ts";
import { ROOT } from "../helpers/agent.ts";
import { startQemu } from "../helpers/qemu.ts";
import type { QemuDisk } from "../helpers/qemu.ts";
import { bootRamdisk, buildRamdisk } from "../helpers/ramdisk-vm.ts";
import type { RamdiskVm } from "../helpers/ramdisk-vm.ts";

/**
 * Software RAID with the real agent inside the deploy ramdisk (the host kernel has no md driver): QEMU boots
 * the ramdisk with three virtio disks and one NVMe disk, the test sends the agent its commands, and checks
 * the disk files from the host afterwards (GPTs with sfdisk, md superblocks with mdadm --examine on
 * read-only loop devices over each partition). Two ramdisk boots and two boots of the written RAID-1.
 */

const MIB = 1024 * 1024;
const DISK_BYTES = 400 * MIB;
const BIOS_BOOT = "21686148-6449-6E6F-744E-656564454649";
const LINUX_RAID = "A19D880F-05FC-4D3B-A006-743F0F84911E";
const IMAGE_ID = "raid-image";
const ROOT_UUID = "414e5649-4c00-4000-8000-726f6f746673";
const LONG = 900_000;

interface TablePartition {
  node: string;
  start: number;
  size: number;
  type: string;
}

async function partitionTable(file: string): Promise<TablePartition[] | null> {
  const result = await exec("sfdisk", ["--json", file]);
  if (result.code !== 0) return null;
  return (
    (JSON.parse(result.stdout) as { partitiontable: { partitions?: TablePartition[] } }).partitiontable
      .partitions ?? []
  );
}

/** mdadm --examine of a byte range of a file, through a read-only loop device (no md driver needed). */
async function examine(file: string, range: { start: number; size: number }): Promise<string | null> {
  const loop = await exec("losetup", [
    "-r",
    "-f",
    "--show",
    "-o",
    String(range.start * 512),
    "--sizelimit",
    String(range.size * 512),
    file,
  ]);
  expect(loop.code, loop.stderr).toBe(0);
  const device = loop.stdout.trim();
  try {
    const result = await exec("mdadm", ["--examine", device]);
    return result.code === 0 ? result.stdout : null;
  } finally {
    await exec("losetup", ["-d", device]);
  }
}

async function readBytes(file: string, offset: number, length: number): Promise<Buffer> {
  const handle = await open(file, "r");
  try {
    const buffer = Buffer.alloc(length);
    await handle.read(buffer, 0, length, offset);
    return buffer;
  } finally {
    await handle.close();
  }
}

describe("software RAID and GRUB by the agent in the deploy ramdisk (QEMU, md in the guest)", () => {
  let dir: string;
  let ramdisk: { kernel: string; initrd: string };
  let disks: QemuDisk[];
  let node: RamdiskVm | undefined;
  let imageUrl: string;
  let imageSha: string;
  const file = (name: string): string => join(dir, `${name}.raw`);

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "anvil-raid-test-"));
    ramdisk = await buildRamdisk(dir);
    const built = await exec(
      "bash",
      ["images/test/build.sh", "--id", IMAGE_ID, "--out", join(dir, "images")],
      {
        cwd: ROOT,
        timeoutMs: 600_000,
      },
    );
    expect(built.code, built.stderr).toBe(0);
    const image = join(dir, "images", `${IMAGE_ID}.partition.raw`);
    imageSha = createHash("sha256")
      .update(await readFile(image))
      .digest("hex");
    disks = [
      { path: file("vda"), format: "raw", serial: "RAID-V1", bus: "virtio" },
      { path: file("vdb"), format: "raw", serial: "RAID-V2", bus: "virtio" },
      { path: file("vdc"), format: "raw", serial: "RAID-V3", bus: "virtio" },
      { path: file("nvme"), format: "raw", serial: "RAID-NVME1", bus: "nvme" },
    ];
    for (const disk of disks)
      expect((await exec("truncate", ["-s", String(DISK_BYTES), disk.path])).code).toBe(0);
    node = await bootRamdisk({ ramdisk, disks });
    imageUrl = node.conductor.serve("root.raw", image);
  }, LONG);

  afterAll(async () => {
    await node?.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it(
    "lists its clean and deploy steps",
    async () => {
      const clean = (await node!.call("get_clean_steps", {})) as { clean_steps: { step: string }[] };
      const deploy = (await node!.call("get_deploy_steps", {})) as { deploy_steps: { step: string }[] };
      expect(clean.clean_steps.map((s) => s.step)).toEqual(
        expect.arrayContaining(["create_configuration", "delete_configuration", "erase_devices_metadata"]),
      );
      // raid.apply_configuration too: the conductor declares it, and the agent now reports the same catalogue
      expect(deploy.deploy_steps.map((s) => s.step)).toEqual([
        "apply_configuration",
        "write_image",
        "install_bootloader",
      ]);
    },
    LONG,
  );

  it(
    "refuses RAID-1+0 over two disks with a clear error, touching nothing",
    async () => {
      const error = await node!.callFailing("create_raid", {
        logical_disks: [
          { size_gb: "MAX", raid_level: "1+0", controller: "software", physical_disks: ["vda", "vdb"] },
        ],
      });
      expect(error).toEqual({
        code: "BAD_ARGS",
        message: expect.stringMatching(/RAID-1\+0 needs at least 4 disks, got 2/) as unknown,
      });
    },
    LONG,
  );

  it(
    "builds RAID-1 over two virtio disks, writes a partition image onto md0 and installs GRUB to both",
    async () => {
      const created = CreatedRaidConfigSchema.parse(
        (
          (await node!.call("create_raid", {
            logical_disks: [
              {
                size_gb: "MAX",
                raid_level: "1",
                controller: "software",
                is_root_volume: true,
                volume_name: "root",
                physical_disks: [{ serial: "RAID-V1" }, "/dev/vdb"],
              },
            ],
            boot_mode: "bios",
          })) as { raid_config: unknown }
        ).raid_config,
      );
      expect(created.logical_disks).toEqual([
        expect.objectContaining({
          device: "/dev/md0",
          raid_level: "1",
          members: ["/dev/vda2", "/dev/vdb2"],
          physical_disks: ["/dev/vda", "/dev/vdb"],
          root_device_hint: { name: "/dev/md0" },
        }),
      ]);
      expect(created.logical_disks[0]!.size_bytes).toBeGreaterThan(DISK_BYTES - 8 * MIB);
      expect(created.boot_partitions.map((b) => [b.partition, b.kind])).toEqual([
        ["/dev/vda1", "bios"],
        ["/dev/vdb1", "bios"],
      ]);

      // A hint naming a holder picks the array it belongs to.
      const written = (await node!.call("write_image", {
        image: {
          url: imageUrl,
          checksum: { algo: "sha256", value: imageSha },
          image_type: "partition",
          partition: { root_mb: 64 },
        },
        root_device: { serial: "RAID-V1" },
      })) as { root_device: { name: string }; partitions: { root: { number: number } } };
      expect(written.root_device.name).toBe("/dev/md0");
      expect(written.partitions.root.number).toBe(1);

      const boot = await node!.call("install_bootloader", { boot_mode: "bios" });
      expect(boot).toMatchObject({
        boot_mode: "bios",
        root_device: "/dev/md0",
        root_partition: "/dev/md0p1",
        installed_to: ["/dev/vda", "/dev/vdb"],
        grub: "ramdisk",
        grub_cfg: "generated",
      });
      await node!.call("sync", {});
      await node!.stop();
      node = undefined;
    },
    LONG,
  );

  it("left on each holder a GPT, GRUB's boot code and core image, and an md RAID-1 member", async () => {
    const uuids = new Set<string>();
    for (const name of ["vda", "vdb"]) {
      const table = await partitionTable(file(name));
      expect(table?.map((p) => p.type)).toEqual([BIOS_BOOT, LINUX_RAID]);
      // boot.img in the MBR says "GRUB"; core.img fills the start of the BIOS boot partition.
      expect((await readBytes(file(name), 0, 512)).includes("GRUB")).toBe(true);
      const core = await readBytes(file(name), table![0]!.start * 512, 64 * 1024);
      expect(core.some((byte) => byte !== 0)).toBe(true);
      const superblock = await examine(file(name), table![1]!);
      expect(superblock).toMatch(/Raid Level : raid1/);
      expect(superblock).toMatch(/Raid Devices : 2/);
      expect(superblock).toMatch(/Version : 1\.2/);
      uuids.add(/Array UUID : (\S+)/.exec(superblock ?? "")?.[1] ?? "");
    }
    expect(uuids.size).toBe(1);
  });

  it.each([
    ["both disks", ["vda", "vdb"]],
    ["the second disk alone (the first one died)", ["vdb"]],
  ])(
    "the machine boots the written image through GRUB from %s",
    async (_, names) => {
      // A failed step above may have left the ramdisk running, holding the VM slot.
      await node?.stop();
      node = undefined;
      const vm = await startQemu({
        memoryMb: 256,
        nics: [],
        boot: "disk",
        disks: names.map((name) => ({ path: file(name), format: "raw" as const, bus: "virtio" as const })),
        extraArgs: ["-nic", "none"],
      });
      try {
        // GRUB's generated entry boots the image's kernel, which prints its id and then its command line.
        const text = await vm.waitForSerial(/ANVIL-TEST-IMAGE-CMDLINE[^\n]*\n/, {
          timeoutMs: 300_000,
          failOn: /Kernel panic|No bootable device|grub rescue>/,
        });
        expect(text).toContain(`ANVIL-TEST-IMAGE-BOOTED ${IMAGE_ID}`);
        expect(text).toContain(`root=UUID=${ROOT_UUID}`);
      } finally {
        await vm.stop();
      }
    },
    LONG,
  );

  it(
    "after a reboot, delete_raid finds the RAID-1 nothing assembled and wipes it; then RAID-1+0 and RAID-0 over four disks come and go",
    async () => {
      node = await bootRamdisk({ ramdisk, disks });
      const foreign = (await node.call("delete_raid", {})) as Record<string, string[]>;
      expect(foreign).toEqual({
        stopped: [],
        superblocks_zeroed: ["/dev/vda2", "/dev/vdb2"],
        disks_wiped: ["/dev/vda", "/dev/vdb"],
      });

      const created = CreatedRaidConfigSchema.parse(
        (
          (await node.call("create_raid", {
            logical_disks: [
              { size_gb: 1, raid_level: "0", controller: "software", volume_name: "scratch" },
              { size_gb: "MAX", raid_level: "1+0", controller: "software", is_root_volume: true },
            ],
            boot_mode: "bios",
          })) as { raid_config: unknown }
        ).raid_config,
      );
      expect(created.logical_disks.map((d) => [d.device, d.raid_level, d.members])).toEqual([
        ["/dev/md0", "1+0", ["/dev/nvme0n1p3", "/dev/vda3", "/dev/vdb3", "/dev/vdc3"]],
        ["/dev/md1", "0", ["/dev/nvme0n1p2", "/dev/vda2", "/dev/vdb2", "/dev/vdc2"]],
      ]);
      // RAID-0 of 1 GiB over four members: 256 MiB each, less md's data offset.
      expect(created.logical_disks[1]!.size_bytes).toBeGreaterThan(900 * MIB);
      expect(created.logical_disks[1]!.size_bytes).toBeLessThanOrEqual(1024 * MIB);

      const deleted = (await node.call("delete_raid", {})) as Record<string, string[]>;
      expect(deleted.stopped).toEqual(["/dev/md0", "/dev/md1"]);
      expect(deleted.superblocks_zeroed).toHaveLength(8);
      expect(deleted.disks_wiped).toEqual(["/dev/nvme0n1", "/dev/vda", "/dev/vdb", "/dev/vdc"]);
      await node.call("sync", {});
      await node.stop();
      node = undefined;
      for (const disk of disks) {
        expect(await partitionTable(disk.path)).toBeNull();
        // Where the RAID-0 member was (the plan: 1 MiB BIOS boot from 1 MiB, then 256 MiB): no superblock.
        expect(await examine(disk.path, { start: (3 * MIB) / 512, size: (256 * MIB) / 512 })).toBeNull();
      }
    },
    LONG,
  );
});

describe("GRUB by UEFI on every RAID-1 holder's ESP, and by BIOS on a plain disk (QEMU, md in the guest)", () => {
  const OVMF = "/usr/share/ovmf/OVMF.fd";
  const ESP = "C12A7328-F81F-11D2-BA4B-00A0C93EC93B";
  let dir: string;
  let ramdisk: { kernel: string; initrd: string };
  let disks: QemuDisk[];
  let node: RamdiskVm | undefined;
  let imageUrl: string;
  let imageSha: string;
  const file = (name: string): string => join(dir, `${name}.raw`);

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "anvil-raid-uefi-test-"));
    ramdisk = await buildRamdisk(dir);
    const built = await exec(
      "bash",
      ["images/test/build.sh", "--id", IMAGE_ID, "--out", join(dir, "images")],
      {
        cwd: ROOT,
        timeoutMs: 600_000,
      },
    );
    expect(built.code, built.stderr).toBe(0);
    const image = join(dir, "images", `${IMAGE_ID}.partition.raw`);
    imageSha = createHash("sha256")
      .update(await readFile(image))
      .digest("hex");
    disks = [
      { path: file("plain"), format: "raw", serial: "PLAIN", bus: "virtio" },
      { path: file("m1"), format: "raw", serial: "MIRROR-1", bus: "virtio" },
      { path: file("m2"), format: "raw", serial: "MIRROR-2", bus: "virtio" },
    ];
    for (const disk of disks)
      expect((await exec("truncate", ["-s", String(DISK_BYTES), disk.path])).code).toBe(0);
    node = await bootRamdisk({ ramdisk, disks });
    imageUrl = node.conductor.serve("root.raw", image);
  }, LONG);

  afterAll(async () => {
    await node?.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  const partitionImage = (): unknown => ({
    url: imageUrl,
    checksum: { algo: "sha256", value: imageSha },
    image_type: "partition",
    partition: { root_mb: 64 },
  });

  it(
    "installs GRUB for a partition image on a plain GPT disk (adding a BIOS boot partition), then, after a reboot that re-assembles md0, into both ESPs of a RAID-1",
    async () => {
      await node!.call("write_image", { image: partitionImage(), root_device: { serial: "PLAIN" } });
      expect(
        await node!.call("install_bootloader", { root_device: { serial: "PLAIN" }, boot_mode: "bios" }),
      ).toMatchObject({
        root_device: "/dev/vda",
        root_partition: "/dev/vda1",
        installed_to: ["/dev/vda"],
        grub_cfg: "generated",
      });

      await node!.call("create_raid", {
        logical_disks: [
          { size_gb: "MAX", raid_level: "1", controller: "software", physical_disks: ["vdb", "vdc"] },
        ],
        boot_mode: "uefi",
      });
      const written = (await node!.call("write_image", { image: partitionImage() })) as {
        root_device: { name: string };
      };
      expect(written.root_device.name).toBe("/dev/md0");
      // As between cleaning and deploying: a new boot of the ramdisk, where nothing assembled the array.
      await node!.call("sync", {});
      await node!.stop();
      node = await bootRamdisk({ ramdisk, disks });
      expect(await node.call("install_bootloader", { boot_mode: "uefi" })).toMatchObject({
        boot_mode: "uefi",
        root_device: "/dev/md0",
        installed_to: ["/dev/vdb1", "/dev/vdc1"],
      });
      await node.call("sync", {});
      await node.stop();
      node = undefined;

      const plain = await partitionTable(file("plain"));
      expect(plain?.map((p) => p.type)).toContain(BIOS_BOOT);
      for (const name of ["m1", "m2"]) {
        const table = await partitionTable(file(name));
        expect(table?.map((p) => p.type)).toEqual([ESP, LINUX_RAID]);
      }
    },
    LONG,
  );

  it.each([
    ["the plain disk by BIOS", ["plain"], []],
    ["the second mirror alone by UEFI (OVMF)", ["m2"], ["-bios", OVMF]],
  ])(
    "the machine boots the written image through GRUB from %s",
    async (...[, names, firmware]) => {
      // A failed step above may have left the ramdisk running, holding the VM slot.
      await node?.stop();
      node = undefined;
      const vm = await startQemu({
        // OVMF's GRUB ran out of memory loading the kernel and initrd with 256 MB.
        memoryMb: 512,
        nics: [],
        boot: "disk",
        disks: names.map((name) => ({ path: file(name), format: "raw" as const, bus: "virtio" as const })),
        extraArgs: ["-nic", "none", ...firmware],
      });
      try {
        const text = await vm.waitForSerial(/ANVIL-TEST-IMAGE-CMDLINE[^\n]*\n/, {
          timeoutMs: 300_000,
          failOn: /Kernel panic|No bootable device|grub rescue>|Failed to boot both default and fallback/,
        });
        expect(text).toContain(`ANVIL-TEST-IMAGE-BOOTED ${IMAGE_ID}`);
        expect(text).toContain(`root=UUID=${ROOT_UUID}`);
      } finally {
        await vm.stop();
      }
    },
    LONG,
  );
});
