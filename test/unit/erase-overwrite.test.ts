import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { overwrite } from "../../agent/disk/erase/overwrite.ts";
import { planSamples, verifySamples } from "../../agent/disk/erase/verify.ts";

const MiB = 1024 * 1024;
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "anvil-overwrite-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("overwrite", () => {
  it("stops at the next block when aborted, and rejects with the abort's reason", async () => {
    const path = join(dir, "abort.img");
    await writeFile(path, randomBytes(64 * MiB));
    const controller = new AbortController();
    let blocks = 0;
    const run = overwrite({
      path,
      size: 64 * MiB,
      randomPasses: 0,
      finalZeros: true,
      samples: [],
      blockSize: MiB,
      signal: controller.signal,
      onProgress: () => {
        if (++blocks === 2) controller.abort(new Error("operator cancelled"));
      },
    });
    await expect(run).rejects.toThrow("operator cancelled");
    expect(blocks).toBeLessThan(8);
    const after = await readFile(path);
    expect(after.subarray(63 * MiB).every((b) => b === 0)).toBe(false); // the end was never reached
  });

  it("a disk whose size is not a multiple of 4 KiB is overwritten to its last byte, and verified", async () => {
    const size = 5 * MiB + 512 * 3;
    const path = join(dir, "odd.img");
    await writeFile(path, randomBytes(size));
    const samples = planSamples(size);
    const result = await overwrite({
      path,
      size,
      randomPasses: 1,
      finalZeros: false,
      samples,
      blockSize: MiB,
    });
    expect(result).toMatchObject({ bytes: size, passes: 1 });
    expect(
      (await verifySamples(path, samples, { expect: { kind: "digests", digests: result.digests } })).ok,
    ).toBe(true);
    const after = await readFile(path);
    expect(after.length).toBe(size);
    expect(after.subarray(size - 512).every((b) => b === 0)).toBe(false); // random, to the end
  });
});
