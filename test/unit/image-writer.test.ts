import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ImageError } from "../../agent/image/errors.ts";
import { ImageWriter } from "../../agent/image/writer.ts";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "anvil-writer-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function target(content: Buffer): Promise<string> {
  const path = join(dir, `t-${Math.random().toString(16).slice(2)}`);
  await writeFile(path, content);
  return path;
}

describe("ImageWriter", () => {
  it("on a target that does not read zeros, fills every byte the image left out with zeros", async () => {
    const path = await target(Buffer.alloc(64 * 1024, 0xee));
    const writer = await ImageWriter.open({ path, readsZeroes: false, blockSize: 8192 });
    // Out of order, with holes, as qcow2 delivers clusters.
    await writer.write({ offset: 40_000, data: Buffer.alloc(1000, 2) });
    await writer.write({ offset: 0, data: Buffer.alloc(100, 1) });
    await writer.finish(50_000);
    const disk = await readFile(path);
    expect(disk.subarray(0, 100).every((b) => b === 1)).toBe(true);
    expect(disk.subarray(100, 40_000).every((b) => b === 0)).toBe(true);
    expect(disk.subarray(40_000, 41_000).every((b) => b === 2)).toBe(true);
    expect(disk.subarray(41_000, 50_000).every((b) => b === 0)).toBe(true);
    // Beyond the image the disk is untouched.
    expect(disk.subarray(50_000).every((b) => b === 0xee)).toBe(true);
  });

  it("on a target that reads zeros, skips all-zero blocks and counts only what it wrote", async () => {
    const path = await target(Buffer.alloc(0));
    const writer = await ImageWriter.open({ path, readsZeroes: true, blockSize: 256 * 1024 });
    const image = Buffer.alloc(1024 * 1024);
    image.fill(9, 300_000, 310_000);
    for (let at = 0; at < image.length; at += 4096)
      await writer.write({ offset: at, data: image.subarray(at, at + 4096) });
    await writer.finish(image.length);
    expect(writer.bytesWritten).toBe(64 * 1024); // the one 64 KiB grain that holds data
    const disk = await readFile(path);
    expect(disk.length).toBe(image.length); // trailing zeros exist even though they were skipped
    expect(disk.equals(image)).toBe(true);
  });

  it("writes at an offset (a partition) and refuses an image larger than its limit", async () => {
    const path = await target(Buffer.alloc(4096));
    const writer = await ImageWriter.open({ path, offset: 1024, limit: 2048, readsZeroes: false });
    await writer.write({ offset: 0, data: Buffer.alloc(2048, 5) });
    await expect(writer.write({ offset: 2048, data: Buffer.alloc(1, 5) })).rejects.toBeInstanceOf(ImageError);
    await writer.finish(2048);
    const disk = await readFile(path);
    expect(disk.subarray(0, 1024).every((b) => b === 0)).toBe(true);
    expect(disk.subarray(1024, 3072).every((b) => b === 5)).toBe(true);
  });

  it("property: any set of extents, in any order, ends up exactly as applied to a zeroed disk", async () => {
    const size = 96 * 1024;
    const extent = fc.record({
      offset: fc.integer({ min: 0, max: size - 1 }),
      length: fc.integer({ min: 1, max: 20_000 }),
      byte: fc.integer({ min: 1, max: 255 }),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(extent, { maxLength: 12 }), fc.boolean(), async (extents, readsZeroes) => {
        const path = await target(readsZeroes ? Buffer.alloc(0) : Buffer.alloc(size + 4096, 0xee));
        const writer = await ImageWriter.open({ path, readsZeroes, blockSize: 16 * 1024 });
        const model = Buffer.alloc(size);
        // qcow2 never maps a guest range twice; keep the extents disjoint like it does.
        const taken = new Uint8Array(size);
        for (const { offset, length, byte } of extents) {
          const end = Math.min(size, offset + length);
          if (taken.subarray(offset, end).some((t) => t === 1)) continue;
          taken.fill(1, offset, end);
          model.fill(byte, offset, end);
          await writer.write({ offset, data: Buffer.alloc(end - offset, byte) });
        }
        await writer.finish(size);
        const disk = await readFile(path);
        expect(disk.subarray(0, size).equals(model)).toBe(true);
      }),
      { numRuns: 60 },
    );
  });
});
