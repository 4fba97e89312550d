import { createHash, randomBytes } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { HashingTap } from "../../agent/image/checksum.ts";
import { ParallelHash } from "../../agent/image/parallel-hash.ts";

const sha256 = (data: Buffer): string => createHash("sha256").update(data).digest("hex");
const DATA = randomBytes(20 * 1024 * 1024 + 777);

/** `data` in pieces of the given sizes (cycled), each a view of one reused buffer, overwritten after use. */
async function* pieces(data: Buffer, sizes: number[]): AsyncGenerator<Buffer> {
  const reused = Buffer.alloc(Math.max(...sizes));
  for (let at = 0, i = 0; at < data.length; i += 1) {
    const n = data.copy(reused, 0, at, at + (sizes[i % sizes.length] ?? 1));
    yield reused.subarray(0, n);
    reused.fill(0xee);
    at += n;
  }
}

describe("ParallelHash", () => {
  it("property: any split of the bytes (pieces past the ring's size included) hashes as one inline hash", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 1, max: 9 * 1024 * 1024 }), { minLength: 1, maxLength: 6 }),
        fc.integer({ min: 0, max: DATA.length }),
        async (sizes, length) => {
          const data = DATA.subarray(0, length);
          const hash = new ParallelHash("sha256");
          for await (const piece of pieces(data, sizes)) await hash.update(piece);
          expect(await hash.digest()).toBe(sha256(data));
        },
      ),
      { numRuns: 12 },
    );
  });

  it("the tap hands a large stream to the worker and yields its chunks untouched, in order", async () => {
    const tap = new HashingTap("sha256");
    const seen: Buffer[] = [];
    let asked = 0;
    for await (const chunk of tap.pass(pieces(DATA, [300_000, 65_536, 1]), () => (asked += 1) > 0))
      seen.push(Buffer.from(chunk));
    expect(asked).toBe(1);
    expect(Buffer.concat(seen).equals(DATA)).toBe(true);
    expect(tap.digest().value).toBe(sha256(DATA));
  });

  it("a tap told not to go parallel hashes inline to the same digest", async () => {
    const tap = new HashingTap("sha256");
    for await (const chunk of tap.pass(pieces(DATA, [1 << 20]), () => false)) void chunk;
    expect(tap.digest().value).toBe(sha256(DATA));
  });
});
