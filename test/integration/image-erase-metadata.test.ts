import { randomBytes } from "node:crypto";
import { mkdtemp, open, rm, truncate, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureDeviceNode } from "../../agent/disk/device-node.ts";
import { eraseDeviceMetadata, eraseDevicesMetadata } from "../../agent/disk/erase-metadata.ts";
import { exec } from "../../shared/system/exec.ts";
import { runOk } from "../helpers/run.ts";

const MiB = 1024 * 1024;
let dir: string;

async function readAt(path: string, offset: number, length: number): Promise<Buffer> {
  const handle = await open(path, "r");
  const buffer = Buffer.alloc(length);
  await handle.read(buffer, 0, length, offset);
  await handle.close();
  return buffer;
}

const isZero = (data: Buffer): boolean => data.equals(Buffer.alloc(data.length));

/** A 64 MiB disk file with a GPT (both headers), two partitions and an ext4 filesystem on the disk's tail. */
async function makeDisk(name: string): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, "");
  await truncate(path, 64 * MiB);
  await runOk("sfdisk", ["-q", path], { input: "label: gpt\nsize=16MiB, name=a\nsize=16MiB, name=b\n" });
  // Data the erase must leave alone, in the middle of the disk.
  const handle = await open(path, "r+");
  await handle.write(Buffer.alloc(MiB, 0x5a), 0, MiB, 40 * MiB);
  await handle.close();
  return path;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "anvil-erase-"));
});

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("eraseDeviceMetadata on a file", () => {
  it("removes both GPT headers and every signature wipefs knows; zeroes the first and last MiB only", async () => {
    const disk = await makeDisk("disk.img");
    expect(await runOk("wipefs", ["--no-act", disk])).toContain("gpt");
    const result = await eraseDeviceMetadata(disk);
    expect(result.zapped_bytes).toBe(MiB);
    expect(await runOk("wipefs", ["--no-act", disk])).toBe("");
    expect(isZero(await readAt(disk, 0, MiB))).toBe(true);
    expect(isZero(await readAt(disk, 63 * MiB, MiB))).toBe(true);
    expect((await readAt(disk, 40 * MiB, 16)).every((b) => b === 0x5a)).toBe(true);
    const sfdisk = await exec("sfdisk", ["--json", disk]);
    expect(sfdisk.stdout).not.toContain("partitiontable");
  });

  it("erases a list of disks and reports each", async () => {
    const disks = [await makeDisk("d1.img"), await makeDisk("d2.img")];
    const results = await eraseDevicesMetadata(disks);
    expect(results.map((r) => r.device)).toEqual(disks);
    for (const disk of disks) expect(await runOk("wipefs", ["--no-act", disk])).toBe("");
  });

  it("a disk smaller than 2 MiB is zeroed whole", async () => {
    const small = join(dir, "small.img");
    await writeFile(small, randomBytes(1536 * 1024));
    await eraseDeviceMetadata(small);
    expect(isZero(await readAt(small, 0, 1536 * 1024))).toBe(true);
  });
});

describe("eraseDeviceMetadata on a loop device", () => {
  let loop: string | undefined;

  afterAll(async () => {
    if (!loop) return;
    await exec("partx", ["--delete", loop]);
    await exec("losetup", ["--detach", loop]);
  });

  it("wipes the partitions' filesystems, then the disk's tables", async (context) => {
    const disk = await makeDisk("loop.img");
    const attach = await exec("losetup", ["--find", "--show", "--partscan", disk]);
    if (attach.code !== 0) return context.skip(`no loop devices here: ${attach.stderr.trim()}`);
    loop = attach.stdout.trim();
    // The host kernel may not parse GPT itself: let util-linux tell it about the partitions.
    await runOk("partx", ["--add", loop]).catch(() => undefined);
    const firstPartition = await ensureDeviceNode(`${loop.replace("/dev/", "")}p1`);
    await runOk("mkfs.ext4", ["-q", "-F", firstPartition]);
    // ext4's superblock magic (0xEF53) sits 1080 bytes into the partition, which starts at 1 MiB.
    expect((await readAt(disk, MiB + 1080, 2)).readUInt16LE(0)).toBe(0xef53);

    const result = await eraseDeviceMetadata(loop);
    expect(result.partitions).toContain(firstPartition);
    expect((await readAt(disk, MiB + 1080, 2)).readUInt16LE(0)).toBe(0);
    expect(await runOk("wipefs", ["--no-act", loop])).toBe("");
    expect(isZero(await readAt(disk, 63 * MiB, MiB))).toBe(true);
  });
});
