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

  it("a checkpoint's prefix digest, asked of the worker mid-stream, is the digest of the bytes passed so far", async () => {
    const tap = new HashingTap("sha256");
    const prefixes: [number, string][] = [];
    for await (const chunk of tap.pass(pieces(DATA, [3 * 1024 * 1024 + 5]), () => true)) {
      void chunk;
      if (prefixes.length < 3) prefixes.push([tap.bytes, await tap.prefixDigest()]);
    }
    expect(prefixes.map(([bytes]) => bytes)).toEqual([1, 2, 3].map((n) => n * (3 * 1024 * 1024 + 5)));
    for (const [bytes, digest] of prefixes) expect(digest).toBe(sha256(DATA.subarray(0, bytes)));
    expect(tap.digest().value).toBe(sha256(DATA));
  });

  it("a tap that already hashed bytes (a resumed write) stays inline: its state cannot move to a worker", async () => {
    const tap = new HashingTap("sha256");
    tap.update(DATA.subarray(0, 1000));
    let asked = 0;
    for await (const chunk of tap.pass(pieces(DATA.subarray(1000), [1 << 20]), () => (asked += 1) > 0)) {
      void chunk;
      // inline, the tap takes bytes outside pass too; a worker's would throw
      expect(() => tap.fork()).not.toThrow();
    }
    expect(asked).toBe(0);
    expect(tap.digest().value).toBe(sha256(DATA));
  });

  it("a failing source stops the worker and the tap's error is the source's", async () => {
    const tap = new HashingTap("sha256");
    async function* failing(): AsyncGenerator<Buffer> {
      yield DATA.subarray(0, 1 << 20);
      throw new Error("connection reset");
    }
    const drain = async (): Promise<void> => {
      for await (const chunk of tap.pass(failing(), () => true)) void chunk;
    };
    await expect(drain()).rejects.toThrow("connection reset");
    // the worker is gone: the tap hashes inline again
    expect(() => tap.update(Buffer.alloc(1))).not.toThrow();
  });

  it("a tap told not to go parallel hashes inline to the same digest", async () => {
    const tap = new HashingTap("sha256");
    for await (const chunk of tap.pass(pieces(DATA, [1 << 20]), () => false)) void chunk;
    expect(tap.digest().value).toBe(sha256(DATA));
  });
});
