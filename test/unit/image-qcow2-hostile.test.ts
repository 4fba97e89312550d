import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ImageError } from "../../agent/image/errors.ts";
import type { Extent } from "../../agent/image/extent.ts";
import {
  parseQcow2Header,
  Qcow2Converter,
  QCOW2_LIMIT_DEFAULTS,
  vetQcow2Metadata,
} from "../../agent/image/qcow2.ts";
import type { Qcow2Limits } from "../../agent/image/qcow2.ts";
import { ImageWriter } from "../../agent/image/writer.ts";
import { buildQcow2, qcow2Bomb } from "../helpers/qcow2.ts";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "anvil-qcow2-hostile-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/**
 * The image in pieces of `size` bytes, each a view of one reused buffer that is overwritten once the consumer
 * asks for the next piece (as the download's receive ring and the swarm's pooled chunks are).
 */
async function* chunked(image: Buffer, size: number): AsyncGenerator<Buffer> {
  const reused = Buffer.alloc(size);
  for (let at = 0; at < image.length; at += size) {
    const n = image.copy(reused, 0, at, at + size);
    yield reused.subarray(0, n);
    reused.fill(0xee);
  }
}

interface Converted {
  converter: Qcow2Converter;
  extents: Extent[];
  error: unknown;
}

async function convert(
  image: Buffer,
  options: { chunk?: number; limits?: Qcow2Limits } = {},
): Promise<Converted> {
  const converter = new Qcow2Converter(options.limits);
  const extents: Extent[] = [];
  try {
    // Extents are views valid until the next is pulled: keep copies.
    for await (const extent of converter.extents(chunked(image, options.chunk ?? 4096)))
      extents.push({ offset: extent.offset, data: Buffer.from(extent.data) });
    return { converter, extents, error: undefined };
  } catch (error) {
    return { converter, extents, error };
  }
}

function assemble(extents: Extent[], size: number): Buffer {
  const disk = Buffer.alloc(size);
  for (const { offset, data } of extents) data.copy(disk, offset);
  return disk;
}

/** Cluster contents: random bytes (incompressible) or a repeated byte (compressible). */
const clusterData = (cs: number): fc.Arbitrary<Buffer> =>
  fc.oneof(
    fc.integer({ min: 1, max: 255 }).map((b) => Buffer.alloc(cs, b)),
    fc.uint8Array({ minLength: 16, maxLength: 16 }).map((seed) => {
      const data = Buffer.alloc(cs);
      for (let i = 0; i < cs; i += 1) data[i] = seed[i % 16] ?? 0 ^ (i * 31);
      return data;
    }),
  );

const imageSpec = fc
  .integer({ min: 9, max: 13 })
  .chain((clusterBits) => {
    const cs = 2 ** clusterBits;
    return fc.record({
      clusterBits: fc.constant(clusterBits),
      clusters: fc.integer({ min: 1, max: 40 }),
      used: fc.uniqueArray(
        fc.record({
          guest: fc.integer({ min: 0, max: 39 }),
          data: clusterData(cs),
          compressed: fc.boolean(),
        }),
        { maxLength: 12, selector: (c) => c.guest },
      ),
      order: fc.constantFrom("guest" as const, "reversed" as const),
      chunk: fc.integer({ min: 1, max: 3 * cs }),
    });
  })
  .map((spec) => {
    const cs = 2 ** spec.clusterBits;
    const clusters = Math.max(spec.clusters, ...spec.used.map((c) => c.guest + 1));
    return { ...spec, virtualSize: clusters * cs, cs };
  });

const counts: Record<string, number> = {};

describe("qcow2 converter against generated and hostile images", () => {
  afterAll(() => {
    console.log(`qcow2 property runs: ${JSON.stringify(counts)}`);
  });

  it("property: generated images (cluster_bits 9-13, plain and compressed, any host order, any chunking, chunks in one reused buffer) convert exactly", async () => {
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(imageSpec, async (spec) => {
        runs += 1;
        const { image, guest } = buildQcow2({
          clusterBits: spec.clusterBits,
          virtualSize: spec.virtualSize,
          clusters: spec.used,
          order: spec.order,
        });
        const { extents, error, converter } = await convert(image, { chunk: spec.chunk });
        expect(error).toBeUndefined();
        expect(assemble(extents, spec.virtualSize).equals(guest)).toBe(true);
        expect(converter.emittedBytes).toBeLessThanOrEqual(spec.virtualSize);
      }),
      { numRuns: 150 },
    );
    counts.generated = runs;
  });

  it("property: mutated headers, L1/L2 entries and compressed descriptors fail only with an ImageError, inside every bound", async () => {
    const limits = {
      maxBufferedBytes: 64 * 1024,
      maxTableBytes: 256 * 1024,
      maxVirtualSize: 8 * 1024 * 1024,
      metadataFactor: 4,
    };
    // Hostile 64-bit values: huge offsets, flags, unaligned, just past the end, compressed with max sectors.
    const hostileU64 = fc.oneof(
      fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }),
      fc.constantFrom(0n, 1n, 1n << 63n, 1n << 62n, (1n << 62n) | ((1n << 62n) - 1n), (1n << 56n) - 512n),
      fc.integer({ min: 0, max: 1 << 20 }).map((n) => BigInt(n) | (1n << 63n)),
      fc.integer({ min: 0, max: 1 << 20 }).map((n) => BigInt(n) | (1n << 62n) | (7n << 54n)),
    );
    const mutation = fc.record({
      // Mostly the header, L1 and first L2 clusters: where the parser's trust is.
      at: fc.oneof(fc.integer({ min: 0, max: 127 }), fc.integer({ min: 0, max: 16 * 1024 })),
      kind: fc.constantFrom("u64", "u32", "byte"),
      u64: hostileU64,
      u32: fc.oneof(fc.nat(), fc.constantFrom(0, 1, 9, 21, 22, 0xffffffff, 0x7fffffff)),
    });
    let runs = 0;
    let rejected = 0;
    await fc.assert(
      fc.asyncProperty(
        imageSpec,
        fc.array(mutation, { minLength: 1, maxLength: 6 }),
        async (spec, mutations) => {
          runs += 1;
          const { image } = buildQcow2({
            clusterBits: spec.clusterBits,
            virtualSize: spec.virtualSize,
            clusters: spec.used,
            order: spec.order,
          });
          for (const m of mutations) {
            const at = Math.min(m.at, image.length - 8) & ~(m.kind === "byte" ? 0 : 3);
            if (m.kind === "u64") image.writeBigUInt64BE(m.u64, at);
            else if (m.kind === "u32") image.writeUInt32BE(m.u32 >>> 0, at);
            else image[at] = m.u32 & 0xff;
          }
          const { converter, extents, error } = await convert(image, { chunk: spec.chunk, limits });
          if (error !== undefined) {
            rejected += 1;
            expect(error).toBeInstanceOf(ImageError);
          }
          expect(converter.tableBytes).toBeLessThanOrEqual(limits.maxTableBytes);
          expect(converter.peakHeldBytes).toBeLessThanOrEqual(limits.maxBufferedBytes);
          expect(converter.inflatedBytes).toBeLessThanOrEqual(Math.max(converter.virtualSize, 0) + 2 ** 21);
          expect(converter.emittedBytes).toBeLessThanOrEqual(converter.virtualSize);
          for (const { offset, data } of extents) {
            expect(offset).toBeGreaterThanOrEqual(0);
            expect(offset + data.length).toBeLessThanOrEqual(converter.virtualSize);
            expect(converter.virtualSize).toBeLessThanOrEqual(limits.maxVirtualSize);
          }
        },
      ),
      { numRuns: 400 },
    );
    counts.mutated = runs;
    counts.mutatedRejected = rejected;
    expect(rejected).toBeGreaterThan(0);
  });

  it("property: any header with cluster_bits 9-21 either parses within bounds or throws an ImageError", () => {
    let runs = 0;
    fc.assert(
      fc.property(
        fc.record({
          version: fc.constantFrom(2, 3, 4),
          clusterBits: fc.integer({ min: 0, max: 40 }),
          virtualSize: fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }),
          l1Size: fc.oneof(fc.nat(), fc.constant(0xffffffff)),
          l1Offset: fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }),
          refcountOffset: fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }),
          refcountClusters: fc.oneof(fc.nat(), fc.constant(0xffffffff)),
          refcountOrder: fc.integer({ min: 0, max: 64 }),
          incompatible: fc.bigInt({ min: 0n, max: 31n }),
        }),
        (h) => {
          runs += 1;
          const head = Buffer.alloc(512);
          head.writeUInt32BE(0x514649fb, 0);
          head.writeUInt32BE(h.version, 4);
          head.writeUInt32BE(h.clusterBits, 20);
          head.writeBigUInt64BE(h.virtualSize, 24);
          head.writeUInt32BE(h.l1Size, 36);
          head.writeBigUInt64BE(h.l1Offset, 40);
          head.writeBigUInt64BE(h.refcountOffset, 48);
          head.writeUInt32BE(h.refcountClusters, 56);
          head.writeBigUInt64BE(h.incompatible, 72);
          head.writeUInt32BE(h.refcountOrder, 96);
          head.writeUInt32BE(104, 100);
          try {
            const header = parseQcow2Header(head);
            vetQcow2Metadata(header, { ...QCOW2_LIMIT_DEFAULTS, maxVirtualSize: 1 << 40 });
            // Accepted: the L1 copy this would allocate is in proportion to the virtual size.
            expect(header.clusterBits).toBeGreaterThanOrEqual(9);
            expect(header.clusterBits).toBeLessThanOrEqual(21);
            expect(header.virtualSize).toBeLessThanOrEqual(1 << 40);
            const needed = Math.ceil(header.virtualSize / (header.clusterSize * (header.clusterSize / 8)));
            expect(header.l1Size).toBeLessThanOrEqual(Math.max(4 * needed, header.clusterSize / 8));
          } catch (error) {
            expect(error).toBeInstanceOf(ImageError);
          }
        },
      ),
      { numRuns: 2000 },
    );
    counts.headers = runs;
  });

  it("a compressed cluster that inflates past one cluster is refused, and zlib stops at one cluster", async () => {
    const { converter, error } = await convert(qcow2Bomb(64));
    expect(error).toBeInstanceOf(ImageError);
    expect((error as ImageError).code).toBe("image_limit");
    expect((error as ImageError).message).toMatch(/inflates past one cluster/);
    expect(converter.inflatedBytes).toBe(0);
  });

  it("tables out of proportion to the virtual size are refused before anything is allocated", async () => {
    const { image } = buildQcow2({ clusterBits: 16, virtualSize: 1 << 20, clusters: [] });
    const hugeL1 = Buffer.from(image);
    hugeL1.writeUInt32BE(0xffffffff, 36); // 32 GiB of L1 for a 1 MiB disk
    const l1 = await convert(hugeL1);
    expect((l1.error as ImageError).code).toBe("image_limit");
    expect((l1.error as ImageError).message).toMatch(/L1 table has 4294967295 entries/);
    expect(l1.converter.tableBytes).toBeLessThan(8 * 1024); // the empty queues; no L1 copy
    const hugeRefcount = Buffer.from(image);
    hugeRefcount.writeUInt32BE(1 << 20, 56); // 64 GiB of refcount table
    const refcount = await convert(hugeRefcount);
    expect((refcount.error as ImageError).code).toBe("image_limit");
    expect((refcount.error as ImageError).message).toMatch(/refcount table has 1048576 clusters/);
    const tooBig = await convert(image, { limits: { maxVirtualSize: 1 << 19 } });
    expect((tooBig.error as ImageError).code).toBe("target");
  });

  it("mappings announced far ahead of their clusters are charged to the table budget, not to the heap", async () => {
    // 4,000 data clusters whose L2 tables all come first (cluster_bits 9): 4,000 pending mappings.
    const clusters = Array.from({ length: 4000 }, (_, guest) => ({
      guest,
      data: Buffer.alloc(512, 1 + (guest % 250)),
    }));
    const { image, guest } = buildQcow2({ clusterBits: 9, virtualSize: 4000 * 512, clusters });
    const tight = await convert(image, { limits: { maxTableBytes: 32 * 1024 } });
    expect((tight.error as ImageError).code).toBe("image_limit");
    expect(tight.converter.tableBytes).toBeLessThanOrEqual(32 * 1024);
    const roomy = await convert(image, { limits: { maxTableBytes: 1024 * 1024 } });
    expect(roomy.error).toBeUndefined();
    expect(assemble(roomy.extents, 4000 * 512).equals(guest)).toBe(true);
    // 24 bytes per pending mapping (typed queues), doubling: well under what 4,000 objects in a Map cost.
    expect(roomy.converter.tableBytes).toBeLessThanOrEqual(4 * 24 * 4096 + 8 * 8);
  });

  it("a reversed 20k-cluster image (every other guest cluster) lands exactly on a disk that does not read zeros, with linear work", async () => {
    const n = 20_000;
    const cs = 512;
    const size = 2 * n * cs;
    // Every other guest cluster: out of order, what the image covers stays 20k disjoint ranges.
    const clusters = Array.from({ length: n }, (_, i) => {
      const data = Buffer.alloc(cs, 1 + (i % 251));
      data.writeUInt32BE(i, 0);
      return { guest: 2 * i, data };
    });
    const { image, guest } = buildQcow2({ clusterBits: 9, virtualSize: size, clusters, order: "reversed" });
    const path = join(dir, "reversed.img");
    await writeFile(path, Buffer.alloc(size + 4096, 0xee));
    const writer = await ImageWriter.open({ path, readsZeroes: false, blockSize: 64 * 1024 });
    const converter = new Qcow2Converter();
    let extents = 0;
    for await (const extent of converter.extents(chunked(image, 64 * 1024))) {
      extents += 1;
      await writer.write(extent);
    }
    await writer.finish(converter.virtualSize);
    const disk = await readFile(path);
    expect(disk.subarray(0, size).equals(guest)).toBe(true);
    expect(disk.subarray(size).every((b) => b === 0xee)).toBe(true);
    expect(extents).toBe(n);
    // Work counts: one write per out-of-order cluster plus the gap below the first one zeroed once, in
    // 1 MiB calls; no coverage bookkeeping that grows with the writes.
    expect(writer.zeroFilledBytes).toBeLessThanOrEqual(size);
    expect(writer.writeCalls).toBeLessThanOrEqual(n + Math.ceil(size / (1024 * 1024)) + 2);
    expect(writer.bytesWritten).toBeLessThanOrEqual(size + n * cs);
    counts.reversedClusters = n;
  });
});
