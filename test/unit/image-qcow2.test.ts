import { describe, expect, it } from "vitest";
import { isZero, parseQcow2Header, Qcow2Converter } from "../../agent/image/qcow2.ts";
import type { Extent } from "../../agent/image/extent.ts";

/** A minimal qcow2 v3 image built by hand: 64 KiB clusters, one L1 entry, one L2 table, two data clusters. */
function handmadeQcow2(options: { dataBeforeTables?: boolean } = {}): { image: Buffer; guest: Buffer } {
  const cs = 65536;
  const virtualSize = 4 * cs;
  // Layout: 0 header, 1 L1, 2 L2, 3-4 data; or with dataBeforeTables: 0 header, 1-2 data, 3 L1, 4 L2.
  const [l1, l2, d1, d2] = options.dataBeforeTables ? [3, 4, 1, 2] : [1, 2, 3, 4];
  const image = Buffer.alloc(5 * cs);
  image.writeUInt32BE(0x514649fb, 0);
  image.writeUInt32BE(3, 4);
  image.writeUInt32BE(16, 20); // cluster_bits
  image.writeBigUInt64BE(BigInt(virtualSize), 24);
  image.writeUInt32BE(1, 36); // l1_size
  image.writeBigUInt64BE(BigInt(l1 * cs), 40);
  image.writeUInt32BE(4, 96); // refcount_order
  image.writeUInt32BE(104, 100); // header_length
  image.writeBigUInt64BE(BigInt(l2 * cs) | (1n << 63n), l1 * cs);
  // guest cluster 0 -> d2, guest cluster 2 -> d1 (out of order on purpose), guest cluster 3 -> zero flag.
  image.writeBigUInt64BE(BigInt(d2 * cs) | (1n << 63n), l2 * cs);
  image.writeBigUInt64BE(BigInt(d1 * cs) | (1n << 63n), l2 * cs + 16);
  image.writeBigUInt64BE(1n, l2 * cs + 24);
  image.fill(0xa1, d2 * cs, (d2 + 1) * cs);
  image.fill(0xb2, d1 * cs, (d1 + 1) * cs);
  const guest = Buffer.alloc(virtualSize);
  guest.fill(0xa1, 0, cs);
  guest.fill(0xb2, 2 * cs, 3 * cs);
  return { image, guest };
}

async function convert(
  image: Buffer,
  converter = new Qcow2Converter(),
  chunk: { size: number; reused?: boolean } = { size: 10_000 },
): Promise<Buffer> {
  /** With `reused`, every piece is a view of one buffer, overwritten once the next piece is asked for. */
  async function* chunks(): AsyncGenerator<Buffer> {
    const reused = Buffer.alloc(chunk.size);
    for (let at = 0; at < image.length; at += chunk.size) {
      if (!chunk.reused) {
        yield image.subarray(at, at + chunk.size);
        continue;
      }
      yield reused.subarray(0, image.copy(reused, 0, at, at + chunk.size));
      reused.fill(0xee);
    }
  }
  const out = Buffer.alloc(converter.virtualSize || 4 * 65536);
  const extents: Extent[] = [];
  for await (const extent of converter.extents(chunks()))
    extents.push({ ...extent, data: Buffer.from(extent.data) });
  for (const { offset, data } of extents) data.copy(out, offset);
  return out.subarray(0, converter.virtualSize);
}

describe("qcow2 header checks", () => {
  const header = (): Buffer => Buffer.from(handmadeQcow2().image.subarray(0, 512));

  it("accepts a plain v3 header", () => {
    expect(parseQcow2Header(header())).toMatchObject({
      version: 3,
      clusterSize: 65536,
      virtualSize: 4 * 65536,
    });
  });

  it("refuses a backing file, encryption, unknown versions and extended L2", () => {
    const backing = header();
    backing.writeBigUInt64BE(1024n, 8);
    expect(() => parseQcow2Header(backing)).toThrow(/backing file/);
    const encrypted = header();
    encrypted.writeUInt32BE(2, 32);
    expect(() => parseQcow2Header(encrypted)).toThrow(/encrypted/);
    const v4 = header();
    v4.writeUInt32BE(4, 4);
    expect(() => parseQcow2Header(v4)).toThrow(/version 4/);
    const extendedL2 = header();
    extendedL2.writeBigUInt64BE(1n << 4n, 72);
    expect(() => parseQcow2Header(extendedL2)).toThrow(/incompatible features 0x10/);
  });
});

describe("Qcow2Converter", () => {
  it("maps data clusters to their guest offsets, in any host order, and leaves zero clusters out", async () => {
    const { image, guest } = handmadeQcow2();
    expect((await convert(image)).equals(guest)).toBe(true);
  });

  it("holds data that arrives before its tables, then places it", async () => {
    const { image, guest } = handmadeQcow2({ dataBeforeTables: true });
    expect((await convert(image)).equals(guest)).toBe(true);
  });

  it("keeps what it holds when the source reuses its buffers (whole and straddling clusters)", async () => {
    const { image, guest } = handmadeQcow2({ dataBeforeTables: true });
    for (const size of [10_000, 65_536, 3 * 65_536 + 7]) {
      expect((await convert(image, new Qcow2Converter(), { size, reused: true })).equals(guest)).toBe(true);
    }
  });

  it("fails clearly past the hold bound", async () => {
    const { image } = handmadeQcow2({ dataBeforeTables: true });
    await expect(convert(image, new Qcow2Converter({ maxBufferedBytes: 65536 }))).rejects.toMatchObject({
      code: "qcow2_out_of_order",
    });
  });

  it("fails on a truncated image instead of writing half of it", async () => {
    const { image } = handmadeQcow2();
    await expect(convert(image.subarray(0, 3 * 65536))).rejects.toThrow(/truncated/);
  });

  it("isZero sees a single set byte anywhere", () => {
    const data = Buffer.alloc(300_000);
    expect(isZero(data)).toBe(true);
    data[299_999] = 1;
    expect(isZero(data)).toBe(false);
  });
});
