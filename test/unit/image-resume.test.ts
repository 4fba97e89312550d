import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readKeptPrefix, restartPoint, resumeRefusal } from "../../agent/image/resume.ts";
import { ImageWriter } from "../../agent/image/writer.ts";
import { imageIdentity } from "../../conductor/drivers/deploy/write-resume.ts";
import type { ImageSpec } from "../../shared/image.ts";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "anvil-resume-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const KiB = 1024;

const digestOf = (bytes: Buffer): string => createHash("sha256").update(bytes).digest("hex");

describe("resuming a raw write", () => {
  it("the writer keeps the prefix: the O_DIRECT probe and the gap filling start after it", async () => {
    const path = join(dir, "disk");
    const prefix = randomBytes(64 * KiB + 512); // not 4 KiB aligned: the probe rounds up, past it
    await writeFile(path, Buffer.concat([prefix, Buffer.alloc(1024 * KiB, 0xee)]));
    const writer = await ImageWriter.open({ path, readsZeroes: false, keep: prefix.length });
    const rest = randomBytes(200 * KiB);
    await writer.write({ offset: prefix.length + 4 * KiB, data: rest }); // a gap after the prefix: zeros
    await writer.finish(prefix.length + 4 * KiB + rest.length);
    const disk = await readFile(path);
    expect(disk.subarray(0, prefix.length).equals(prefix)).toBe(true);
    expect(disk.subarray(prefix.length, prefix.length + 4 * KiB).every((b) => b === 0)).toBe(true);
    expect(disk.subarray(prefix.length + 4 * KiB, prefix.length + 4 * KiB + rest.length).equals(rest)).toBe(
      true,
    );
  });

  it("property: checkpoints at any byte leave the disk exactly as the image, and the checkpoint's bytes are there once durable", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ size: fc.integer({ min: 1, max: 40 * KiB }), checkpoint: fc.boolean() }), {
          minLength: 1,
          maxLength: 30,
        }),
        fc.boolean(),
        async (chunks, readsZeroes) => {
          const image = randomBytes(chunks.reduce((sum, c) => sum + c.size, 0));
          const path = join(dir, `cp-${Math.random().toString(16).slice(2)}`);
          await writeFile(path, Buffer.alloc(image.length + 8 * KiB, 0xee));
          const writer = await ImageWriter.open({ path, readsZeroes, blockSize: 16 * KiB });
          let offset = 0;
          for (const chunk of chunks) {
            await writer.write({ offset, data: image.subarray(offset, offset + chunk.size) });
            offset += chunk.size;
            if (chunk.checkpoint) {
              const { durable } = await writer.checkpoint();
              await durable;
              expect((await readFile(path)).subarray(0, offset).equals(image.subarray(0, offset))).toBe(true);
            }
          }
          await writer.finish(image.length);
          expect((await readFile(path)).subarray(0, image.length).equals(image)).toBe(true);
        },
      ),
      { numRuns: 40 },
    );
  });

  it("keeps a prefix only when the disk's bytes hash to the checkpoint's digest, whatever byte changed", async () => {
    const image = randomBytes(256 * KiB);
    const path = join(dir, "prefix");
    await writeFile(path, image);
    const bytes = 100 * KiB;
    const checkpoint = { bytes, algo: "sha256" as const, digest: digestOf(image.subarray(0, bytes)) };
    const kept = await readKeptPrefix(path, checkpoint, { offset: 0 });
    expect("refused" in kept).toBe(false);
    if (!("refused" in kept)) {
      // the carried hash continues: the rest hashed on gives the whole image's digest
      kept.tap.update(image.subarray(bytes));
      expect(kept.tap.digest().value).toBe(digestOf(image));
    }
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: bytes - 1 }),
        fc.integer({ min: 1, max: 255 }),
        async (at, xor) => {
          const changed = Buffer.from(image);
          changed[at] = (changed[at] ?? 0) ^ xor;
          await writeFile(path, changed);
          const outcome = await readKeptPrefix(path, checkpoint, { offset: 0 });
          expect(outcome).toEqual({
            refused: `the disk's first ${bytes} bytes differ from the checkpoint's`,
          });
        },
      ),
      { numRuns: 25 },
    );
  });

  it("refuses to resume what a disk prefix cannot continue: compressed, qcow2, partition, no checksum", () => {
    const checkpoint = { bytes: 4096, algo: "sha256" as const, digest: "0".repeat(64) };
    const expected = { algo: "sha256" as const, value: "1".repeat(64) };
    const raw: ImageSpec = { url: "http://store/disk.raw", image_type: "whole-disk" };
    expect(resumeRefusal(checkpoint, { image: raw, expected })).toBeNull();
    const refused = [
      resumeRefusal(checkpoint, { image: raw, expected: undefined }),
      resumeRefusal(checkpoint, {
        image: raw,
        expected: { algo: "sha512", value: "1".repeat(128) },
      }),
      resumeRefusal(checkpoint, { image: { ...raw, compression: "zstd" }, expected }),
      resumeRefusal(checkpoint, { image: { ...raw, disk_format: "qcow2" }, expected }),
      resumeRefusal(checkpoint, { image: { ...raw, image_type: "partition" }, expected }),
      resumeRefusal(checkpoint, { image: { ...raw, size: 1024 }, expected }),
    ];
    expect(refused.every((reason) => typeof reason === "string" && reason.length > 0)).toBe(true);
  });

  it("with a block map, restarts at the start of the range a checkpoint falls in, and keeps that much", async () => {
    const map = {
      imageSize: 64 * KiB,
      blockSize: 4096,
      checksumType: undefined,
      mappedBytes: 24 * KiB,
      ranges: [
        { start: 0, end: 8 * KiB, checksum: undefined },
        { start: 16 * KiB, end: 32 * KiB, checksum: undefined },
      ],
    };
    const at = (bytes: number) => ({ bytes, algo: "sha256" as const, digest: "0".repeat(64) });
    expect(restartPoint(at(8 * KiB), map)).toBe(8 * KiB); // a range's end
    expect(restartPoint(at(12 * KiB), map)).toBe(12 * KiB); // in a hole
    expect(restartPoint(at(20 * KiB), map)).toBe(16 * KiB); // inside the second range
    expect(restartPoint(at(20 * KiB), undefined)).toBe(20 * KiB);

    const image = randomBytes(64 * KiB);
    const path = join(dir, "mapped");
    await writeFile(path, image);
    const checkpoint = { ...at(20 * KiB), digest: digestOf(image.subarray(0, 20 * KiB)) };
    const kept = await readKeptPrefix(path, checkpoint, { offset: 0, restartAt: 16 * KiB });
    expect("refused" in kept ? kept : kept.bytes).toBe(16 * KiB);
    if (!("refused" in kept)) {
      kept.tap.update(image.subarray(16 * KiB));
      expect(kept.tap.digest().value).toBe(digestOf(image));
    }
  });

  it("names an image across temporary URLs: the query (a signature) does not count, the checksum does", () => {
    const checksum = { algo: "sha256" as const, value: "AB".repeat(32) };
    const a = imageIdentity({
      url: "https://swift/v1/img/disk.raw?temp_url_sig=1&temp_url_expires=2",
      checksum,
    });
    const b = imageIdentity({
      url: "https://swift/v1/img/disk.raw?temp_url_sig=3&temp_url_expires=4",
      checksum,
    });
    expect(a).toEqual(b);
    expect(a).toEqual({ image: "https://swift/v1/img/disk.raw", checksum: `sha256:${"ab".repeat(32)}` });
    expect(imageIdentity({ url: "https://swift/v1/img/other.raw", checksum })).not.toEqual(a);
    // credentials in the URL are a secret: never kept in driver_internal_info
    const withCredentials = imageIdentity({
      url: "https://user:s3cret@swift/v1/img/disk.raw?sig=5",
      checksum,
    });
    expect(withCredentials).toEqual(a);
    expect(JSON.stringify(withCredentials)).not.toContain("s3cret");
  });
});
