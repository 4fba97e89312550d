import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, open, rm, truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eraseDevices } from "../../agent/disk/erase/erase-devices.ts";
import type { DiskProgress } from "../../agent/disk/erase/erase-disk.ts";
import { planSamples, verifySamples } from "../../agent/disk/erase/verify.ts";
import { overwrite } from "../../agent/disk/erase/overwrite.ts";
import { LinuxDiskTools } from "../../agent/hardware/linux/disk-tools.ts";
import type { ToolCall } from "../../agent/hardware/disk-tools.ts";
import { EraseOptionsSchema } from "../../shared/erase.ts";
import type { EraseOptions } from "../../shared/erase.ts";
import { blankDisk } from "../../shared/inventory.ts";
import type { Disk } from "../../shared/inventory.ts";
import { silentLogger } from "../../shared/log.ts";
import { exec } from "../../shared/system/exec.ts";
import { ROOT } from "../helpers/agent.ts";
import { MiB, readRange } from "../helpers/disk.ts";
import { runOk } from "../helpers/run.ts";

const SIZE = 64 * MiB;
let dir: string;
const loops: string[] = [];

/** A loop device over a file on the real disk, filled with a recognisable pattern. */
async function patternedLoop(name: string): Promise<{ device: string; disk: Disk; pattern: Buffer }> {
  const file = join(dir, name);
  const pattern = randomBytes(SIZE);
  await writeFile(file, pattern);
  const device = (await runOk("losetup", ["--find", "--show", file])).trim();
  loops.push(device);
  return { device, disk: { ...blankDisk(device, SIZE), rotational: true }, pattern };
}

async function readAll(device: string): Promise<Buffer> {
  return readRange(device, 0, SIZE);
}

const isZero = (data: Buffer): boolean => data.every((byte) => byte === 0);
const options = (overrides: Partial<EraseOptions> = {}): EraseOptions => ({
  ...EraseOptionsSchema.parse({}),
  ...overrides,
});

function request(
  disks: Disk[],
  extra: { options?: EraseOptions; tools?: LinuxDiskTools; mode?: "full" | "metadata" },
) {
  const reports: Array<{ device: string } & DiskProgress> = [];
  return {
    reports,
    run: () =>
      eraseDevices({
        disks,
        mode: extra.mode ?? "full",
        options: extra.options ?? options(),
        tools: extra.tools ?? new LinuxDiskTools(),
        signal: new AbortController().signal,
        logger: silentLogger,
        report: (device, progress) => reports.push({ device, ...progress }),
      }),
  };
}

beforeAll(async () => {
  // On the real disk, not tmpfs: the loop devices must take O_DIRECT and discard like a disk's would.
  await mkdir(join(ROOT, ".tmp"), { recursive: true });
  dir = await mkdtemp(join(ROOT, ".tmp/erase-loop-"));
});

afterAll(async () => {
  for (const loop of loops) await exec("losetup", ["--detach", loop]);
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("erasing loop devices", () => {
  it("discard: a loop device punches holes, so it is discarded and verified to read zeros", async () => {
    const { device, disk, pattern } = await patternedLoop("discard.img");
    expect((await readAll(device)).equals(pattern)).toBe(true);
    const [result] = await request([disk], {}).run();
    expect(result).toMatchObject({ device, method: "discard", verified: true, bytes: SIZE, skipped: null });
    expect(isZero(await readAll(device))).toBe(true);
  });

  it("overwrite: random then zeros, the pattern is gone and the verify pass agreed", async () => {
    const { device, disk } = await patternedLoop("overwrite.img");
    const job = request([disk], { options: options({ enable_discard: false }) });
    const [result] = await job.run();
    expect(result).toMatchObject({ device, method: "overwrite", verified: true, bytes: SIZE });
    expect(isZero(await readAll(device))).toBe(true);
    expect(job.reports.at(-1)).toMatchObject({ bytes_done: 2 * SIZE, bytes_total: 2 * SIZE });
  });

  it("overwrite with random only: no byte of the pattern's sampled blocks survives, and verify checks the random data", async () => {
    const { device, disk, pattern } = await patternedLoop("random.img");
    const [result] = await request([disk], {
      options: options({ enable_discard: false, shred_final_overwrite_with_zeros: false }),
    }).run();
    expect(result).toMatchObject({ method: "overwrite", verified: true });
    const after = await readAll(device);
    expect(isZero(after)).toBe(false);
    for (const offset of [0, SIZE / 2, SIZE - MiB]) {
      expect(after.subarray(offset, offset + 4096).equals(pattern.subarray(offset, offset + 4096))).toBe(
        false,
      );
    }
  });

  it("verify catches a region the overwrite did not cover", async () => {
    const { device } = await patternedLoop("unerased.img");
    const samples = planSamples(SIZE);
    const written = await overwrite({ path: device, size: SIZE, randomPasses: 0, finalZeros: true, samples });
    expect(
      (await verifySamples(device, samples, { expect: { kind: "digests", digests: written.digests } })).ok,
    ).toBe(true);
    // Leave one sampled region unerased, as a disk that silently dropped writes would.
    const victim = samples[Math.floor(samples.length / 2)];
    if (victim === undefined) throw new Error("no samples planned");
    const corrupted = victim.offset + 1024;
    const handle = await open(device, "r+");
    await handle.write(Buffer.alloc(512, 0x5a), 0, 512, corrupted);
    await handle.close();
    const result = await verifySamples(device, samples, {
      expect: { kind: "digests", digests: written.digests },
    });
    expect(result.ok).toBe(false);
    // samples are placed at random and may overlap: every sample holding the corrupted bytes is bad, no other
    const holding = samples.filter((s) => s.offset < corrupted + 512 && corrupted < s.offset + s.length);
    expect(holding).toContainEqual(victim);
    expect(result.bad).toEqual(holding);
  });

  it("a discard that leaves data behind fails its verify and the disk is overwritten instead", async () => {
    const { device, disk } = await patternedLoop("lying-discard.img");
    // A device that says it zeroes discarded blocks but keeps the first MiB (a firmware bug).
    class LyingDiscard extends LinuxDiskTools {
      override async discard(path: string, call: ToolCall & { zeroOut: boolean }): Promise<void> {
        await runOk("blkdiscard", ["--offset", String(MiB), path]);
        void call;
      }
    }
    const [result] = await request([disk], { tools: new LyingDiscard() }).run();
    expect(result).toMatchObject({ method: "overwrite", verified: true });
    expect(result?.fell_back).toEqual([
      { method: "discard", error: expect.stringMatching(/^verify: .*first at byte 0,/) },
    ]);
    expect(isZero(await readAll(device))).toBe(true);
  });

  it("metadata: partition table and signatures gone, the middle of the disk untouched", async () => {
    const { device, disk, pattern } = await patternedLoop("metadata.img");
    await runOk("sfdisk", ["-q", device], { input: "label: gpt\nsize=16MiB, name=a\n" });
    expect(await runOk("wipefs", ["--no-act", device])).toContain("gpt");
    const [result] = await request([disk], { mode: "metadata" }).run();
    expect(result).toMatchObject({ method: "metadata", verified: true, bytes: 2 * MiB });
    expect(await runOk("wipefs", ["--no-act", device])).toBe("");
    const after = await readAll(device);
    expect(isZero(after.subarray(0, MiB)) && isZero(after.subarray(SIZE - MiB))).toBe(true);
    expect(after.subarray(32 * MiB, 33 * MiB).equals(pattern.subarray(32 * MiB, 33 * MiB))).toBe(true);
  });

  it("several disks are erased in parallel: every disk starts before any finishes", async () => {
    const disks = await Promise.all(["p0.img", "p1.img", "p2.img"].map(patternedLoop));
    const job = request(
      disks.map((d) => d.disk),
      { options: options({ enable_discard: false, shred_random_overwrite_iterations: 0 }) },
    );
    const results = await job.run();
    expect(results.map((r) => [r.device, r.method, r.verified])).toEqual(
      disks.map((d) => [d.device, "overwrite", true]),
    );
    for (const { device } of disks) expect(isZero(await readAll(device))).toBe(true);
    const firstDone = job.reports.findIndex(
      (r) => r.bytes_done !== undefined && r.bytes_done === r.bytes_total,
    );
    const started = job.reports.filter((r) => r.message.endsWith("started")).map((r) => r.device);
    expect(job.reports.slice(0, firstDone).filter((r) => r.message.endsWith("started")).length).toBe(3);
    expect(new Set(started)).toEqual(new Set(disks.map((d) => d.device)));
  });

  it("a read-only loop device fails a full erase naming it, unless erase_skip_read_only", async () => {
    const file = join(dir, "ro.img");
    await writeFile(file, "");
    await truncate(file, SIZE);
    const device = (await runOk("losetup", ["--find", "--show", "--read-only", file])).trim();
    loops.push(device);
    const disk = blankDisk(device, SIZE);
    await expect(request([disk], {}).run()).rejects.toThrow(new RegExp(`${device}: the device is read-only`));
    const [skipped] = await request([disk], { options: options({ erase_skip_read_only: true }) }).run();
    expect(skipped).toMatchObject({ device, method: null, skipped: "read-only device" });
  });
});
