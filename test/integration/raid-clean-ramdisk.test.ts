import { createHash } from "node:crypto";
import { mkdtemp, open, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exec } from "../../shared/system/exec.ts";
import { ROOT } from "../helpers/agent.ts";
import { startQemu } from "../helpers/qemu.ts";
import type { QemuDisk } from "../helpers/qemu.ts";
import { bootRamdisk, buildRamdisk } from "../helpers/ramdisk-vm.ts";
import type { RamdiskVm } from "../helpers/ramdisk-vm.ts";

/**
 * Software RAID through cleaning as Ironic does it, with the real agent in the deploy ramdisk (QEMU, md in
 * the guest): the metadata erase of automated cleaning leaves RAID members alone and erases the array
 * itself (IPA's erase_devices_metadata), so the RAID survives; a whole-disk image written onto md0 gets GRUB
 * on every holder from the ramdisk's grub-install (IPA's install_bootloader with software RAID),
 * and boots with its own grub.cfg from either disk; a later metadata erase, in a new boot where nothing assembled the array, erases the image off md0.
 */

const MIB = 1024 * 1024;
const DISK_BYTES = 400 * MIB;
const IMAGE_ID = "raid-clean-image";
const DISK_ROOT_UUID = "414e5649-4c00-4000-8000-6469736b7266";
const LONG = 900_000;

interface EraseResult {
  devices: { device: string; method: string | null; skipped: string | null }[];
}

/** The md superblock of a member partition: its data offset (bytes into the partition). */
async function memberDataOffset(file: string): Promise<{ partitionStart: number; dataOffset: number }> {
  const table = await exec("sfdisk", ["--json", file]);
  expect(table.code, table.stderr).toBe(0);
  const parts = (
    JSON.parse(table.stdout) as { partitiontable: { partitions: { start: number; size: number }[] } }
  ).partitiontable.partitions;
  const member = parts.at(-1)!;
  const loop = await exec("losetup", [
    ...["-r", "-f", "--show", "-o", String(member.start * 512)],
    ...["--sizelimit", String(member.size * 512), file],
  ]);
  expect(loop.code, loop.stderr).toBe(0);
  try {
    const examined = await exec("mdadm", ["--examine", loop.stdout.trim()]);
    expect(examined.code, examined.stderr).toBe(0);
    expect(examined.stdout).toMatch(/Raid Level : raid1/);
    const sectors = Number(/Data Offset : (\d+) sectors/.exec(examined.stdout)?.[1]);
    return { partitionStart: member.start * 512, dataOffset: sectors * 512 };
  } finally {
    await exec("losetup", ["-d", loop.stdout.trim()]);
  }
}

/** The first 512 bytes of md0's data as stored on a member disk (RAID-1: every member holds them). */
async function arrayFirstSector(file: string): Promise<Buffer> {
  const { partitionStart, dataOffset } = await memberDataOffset(file);
  const handle = await open(file, "r");
  try {
    const buffer = Buffer.alloc(512);
    await handle.read(buffer, 0, 512, partitionStart + dataOffset);
    return buffer;
  } finally {
    await handle.close();
  }
}

const hasMbr = (sector: Buffer): boolean => sector[510] === 0x55 && sector[511] === 0xaa;

describe("software RAID through cleaning, and a whole-disk image on md0 (QEMU, md in the guest)", () => {
  let dir: string;
  let ramdisk: { kernel: string; initrd: string };
  let disks: QemuDisk[];
  let node: RamdiskVm | undefined;
  let imageUrl: string;
  let imageSha: string;
  const file = (name: string): string => join(dir, `${name}.raw`);

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "anvil-raid-clean-test-"));
    ramdisk = await buildRamdisk(dir);
    const built = await exec(
      "bash",
      ["images/test/build.sh", "--id", IMAGE_ID, "--out", join(dir, "images")],
      { cwd: ROOT, timeoutMs: 600_000 },
    );
    expect(built.code, built.stderr).toBe(0);
    const image = join(dir, "images", `${IMAGE_ID}.linux-disk.raw`);
    imageSha = createHash("sha256")
      .update(await readFile(image))
      .digest("hex");
    disks = [
      { path: file("vda"), format: "raw", serial: "CLEAN-V1", bus: "virtio" },
      { path: file("vdb"), format: "raw", serial: "CLEAN-V2", bus: "virtio" },
      { path: file("nvme"), format: "raw", serial: "CLEAN-NVME1", bus: "nvme" },
    ];
    for (const disk of disks)
      expect((await exec("truncate", ["-s", String(DISK_BYTES), disk.path])).code).toBe(0);
    node = await bootRamdisk({ ramdisk, disks });
    imageUrl = node.conductor.serve("disk.raw", image);
  }, LONG);

  afterAll(async () => {
    await node?.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it(
    "the metadata erase skips the RAID members and erases md0; a whole-disk image on md0 gets GRUB on both holders",
    async () => {
      await node!.call("create_raid", {
        logical_disks: [
          {
            size_gb: "MAX",
            raid_level: "1",
            controller: "software",
            is_root_volume: true,
            physical_disks: ["vda", "vdb"],
          },
        ],
        boot_mode: "bios",
      });
      // automated cleaning's step, as provide runs it
      const erased = (await node!.call("erase_devices_metadata", {})) as EraseResult;
      const byDevice = new Map(erased.devices.map((d) => [d.device, d]));
      expect(byDevice.get("/dev/md0")).toMatchObject({ method: "metadata", skipped: null });
      expect(byDevice.get("/dev/nvme0n1")).toMatchObject({ method: "metadata", skipped: null });
      for (const member of ["/dev/vda", "/dev/vdb"]) {
        expect(byDevice.get(member)).toMatchObject({
          method: null,
          skipped: expect.stringMatching(/software RAID member/) as unknown,
        });
      }

      const written = (await node!.call("write_image", {
        image: { url: imageUrl, checksum: { algo: "sha256", value: imageSha }, image_type: "whole-disk" },
      })) as { root_device: { name: string } };
      expect(written.root_device.name).toBe("/dev/md0");
      expect(
        await node!.call("install_bootloader", { boot_mode: "bios", root_uuid: DISK_ROOT_UUID }),
      ).toMatchObject({
        boot_mode: "bios",
        root_device: "/dev/md0",
        root_partition: "/dev/md0p1",
        installed_to: ["/dev/vda", "/dev/vdb"],
        // the ramdisk's grub-install (the image's own runs only on request), with the image's grub.cfg
        grub: "ramdisk",
        grub_cfg: "image",
      });
      await node!.call("sync", {});
      await node!.stop();
      node = undefined;
      for (const name of ["vda", "vdb"]) expect(hasMbr(await arrayFirstSector(file(name)))).toBe(true);
    },
    LONG,
  );

  it.each([
    ["both disks", ["vda", "vdb"]],
    ["the second disk alone (the first one died)", ["vdb"]],
  ])(
    "the whole-disk image boots through GRUB with its own grub.cfg from %s",
    async (_, names) => {
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
        const text = await vm.waitForSerial(/ANVIL-TEST-IMAGE-CMDLINE[^\n]*\n/, {
          timeoutMs: 300_000,
          failOn: /Kernel panic|No bootable device|grub rescue>/,
        });
        expect(text).toContain(`ANVIL-TEST-IMAGE-BOOTED ${IMAGE_ID}`);
        expect(text).toContain("anvil.grub_cfg=image");
        expect(text).toContain(`root=UUID=${DISK_ROOT_UUID}`);
      } finally {
        await vm.stop();
      }
    },
    LONG,
  );

  it(
    "in a new boot, the metadata erase assembles md0 and erases the image off it, keeping the RAID",
    async () => {
      node = await bootRamdisk({ ramdisk, disks });
      const erased = (await node.call("erase_devices_metadata", {})) as EraseResult;
      expect(
        erased.devices
          .filter((d) => d.skipped === null)
          .map((d) => d.device)
          .sort(),
      ).toEqual(["/dev/md0", "/dev/nvme0n1"]);
      await node.call("sync", {});
      await node.stop();
      node = undefined;
      // the members keep their superblocks (memberDataOffset checks raid1), md0's data lost its MBR
      for (const name of ["vda", "vdb"]) expect(hasMbr(await arrayFirstSector(file(name)))).toBe(false);
    },
    LONG,
  );
});
