import { createHash } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BlockMap, MappedRange } from "../../agent/image/bmap.ts";
import { ImageError } from "../../agent/image/errors.ts";
import { DownloadSession } from "../../agent/image/fetch.ts";
import { HOLD_CHUNKS, sharedChunks, swarmMappedExtents } from "../../agent/swarm/mapped-chunks.ts";
import type { MappedChunkSource } from "../../agent/swarm/mapped-chunks.ts";
import type { ChunkCheck, TakenChunk } from "../../agent/swarm/swarm-source.ts";
import type { SwarmStats } from "../../shared/swarm.ts";
import { startHttpImageServer } from "../helpers/http-image-server.ts";
import type { HttpImageServer } from "../helpers/http-image-server.ts";

const BLOCK = 4096;
const CHUNK = 16 * BLOCK;

/** Block-aligned, sorted, disjoint ranges over `blocks` blocks, as [first, last] block pairs. */
const layoutArb = fc.integer({ min: 1, max: 12 * (CHUNK / BLOCK) }).chain((blocks) =>
  fc
    .tuple(
      fc.oneof(
        // a few long ranges (some across more chunks than are held back), or many short ones
        fc.uniqueArray(fc.integer({ min: 0, max: blocks }), { maxLength: 4 }),
        fc.uniqueArray(fc.integer({ min: 0, max: blocks }), { maxLength: 24 }),
      ),
      fc.boolean(),
    )
    .map(([cuts, holeFirst]) => {
      const points = [...new Set([0, ...cuts, blocks])].sort((a, b) => a - b);
      const ranges: Array<[number, number]> = [];
      // every other span between cut points is mapped
      for (let i = holeFirst ? 1 : 0; i + 1 < points.length; i += 2)
        ranges.push([points[i] as number, (points[i + 1] as number) - 1]);
      return { blocks, ranges };
    }),
);

/** A wave double: chunks from the store's bytes, those in `lies` as a lying peer's copy (one byte flipped). */
function fakeWave(image: Buffer, lies: Map<number, number>): MappedChunkSource & { storeBytes: number } {
  const slice = (index: number): Buffer =>
    Buffer.from(image.subarray(index * CHUNK, Math.min(image.length, (index + 1) * CHUNK)));
  const taken = (index: number, data: Buffer, peer?: string): TakenChunk => ({
    index,
    data,
    peer,
    release: () => undefined,
  });
  return {
    chunkBytes: CHUNK,
    stats: { wave: "w" } as SwarmStats,
    storeBytes: 0,
    countStoreBytes(bytes: number) {
      this.storeBytes += bytes;
    },
    async *chunks(indices: readonly number[], check?: ChunkCheck) {
      for (const index of indices) {
        const at = lies.get(index);
        const start = index * CHUNK;
        if (at !== undefined) {
          const wrong = slice(index);
          const offset = at % wrong.length;
          wrong[offset] = (wrong[offset] as number) ^ 0x5a;
          // the liar's copy matches its (wrong) anchor: only the block map's digests can refuse it
          if (check?.({ start, end: start + wrong.length }, wrong) === undefined) {
            yield taken(index, wrong, "liar");
            continue;
          }
        }
        yield taken(index, slice(index));
      }
    },
    async repair(chunk: TakenChunk) {
      const store = slice(chunk.index);
      return store.equals(chunk.data) ? chunk : taken(chunk.index, store);
    },
  };
}

describe("block-mapped extents through a swarm wave", () => {
  let dir: string;
  let store: HttpImageServer;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "anvil-swarm-bmap-"));
    store = await startHttpImageServer();
  });
  afterAll(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("writes exactly the mapped bytes, or fails naming the wave; a lying peer never reaches the disk unseen", async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        layoutArb,
        fc.integer({ min: 1, max: BLOCK }),
        fc.array(fc.tuple(fc.nat(11), fc.nat(CHUNK - 1)), { maxLength: 4 }),
        async ({ blocks, ranges: pairs }, tail, lieList) => {
          const size = (blocks - 1) * BLOCK + tail;
          const image = Buffer.alloc(size);
          for (let i = 0; i < size; i++) image[i] = (i * 131 + run * 7 + 1) & 0xff;
          const ranges: MappedRange[] = pairs.map(([first, last]) => {
            const start = first * BLOCK;
            const end = Math.min(size, (last + 1) * BLOCK);
            return {
              start,
              end,
              checksum: createHash("sha256").update(image.subarray(start, end)).digest("hex"),
            };
          });
          const map: BlockMap = {
            imageSize: size,
            blockSize: BLOCK,
            checksumType: "sha256",
            ranges,
            mappedBytes: ranges.reduce((n, r) => n + r.end - r.start, 0),
          };
          const shared = new Set(sharedChunks(map, CHUNK));
          const lies = new Map(lieList.filter(([index]) => shared.has(index)));
          const path = `/image-${run++}.raw`;
          await writeFile(join(dir, "image.raw"), image);
          store.serve(path, join(dir, "image.raw"));

          const wave = fakeWave(image, lies);
          const disk = Buffer.alloc(size);
          const written = Buffer.alloc(size);
          let holes = 0;
          let last = -1;
          const session = new DownloadSession();
          let failure: unknown;
          try {
            for await (const extent of swarmMappedExtents(`${store.url}${path}`, map, {
              swarm: wave,
              fetch: { maxRetries: 0, stallTimeoutMs: 5_000 },
              session,
              onHole: (bytes) => (holes += bytes),
            })) {
              expect(extent.offset).toBeGreaterThan(last);
              last = extent.offset;
              extent.data.copy(disk, extent.offset);
              written.fill(1, extent.offset, extent.offset + extent.data.length);
            }
          } catch (error) {
            failure = error;
          } finally {
            session.close();
          }

          // A range read as it passes (too long to hold back, or with a chunk fetched straight from the
          // store) fails exactly when a lying peer's changed byte falls inside it; every other lie is caught.
          const corrupts = (range: MappedRange): boolean =>
            [...lies].some(([index, at]) => {
              const chunkEnd = Math.min(size, (index + 1) * CHUNK);
              const byte = index * CHUNK + (at % (chunkEnd - index * CHUNK));
              return byte >= range.start && byte < range.end;
            });
          const streamed = (range: MappedRange): boolean => {
            const first = Math.floor(range.start / CHUNK);
            const lastChunk = Math.floor((range.end - 1) / CHUNK);
            let all = true;
            for (let i = first; i <= lastChunk; i++) all &&= shared.has(i);
            return lastChunk > first && (!all || lastChunk - first >= HOLD_CHUNKS);
          };
          const mustFail = ranges.some((range) => streamed(range) && corrupts(range));
          expect(failure !== undefined).toBe(mustFail);
          if (failure !== undefined) {
            expect(failure).toBeInstanceOf(ImageError);
            expect((failure as ImageError).code).toBe("checksum_mismatch");
            expect((failure as Error).message).toMatch(/swarm wave w, with chunks from peers liar/);
            return;
          }
          // every mapped byte written right, nothing else written, holes counted
          for (const range of ranges) {
            expect(disk.subarray(range.start, range.end).equals(image.subarray(range.start, range.end))).toBe(
              true,
            );
          }
          const mapped = ranges.reduce((n, r) => n + r.end - r.start, 0);
          expect(written.reduce((n, b) => n + b, 0)).toBe(mapped);
          expect(holes + mapped).toBe(size);
          // sparse chunks' ranges came from the store, nothing more
          const direct = ranges.reduce((n, r) => {
            let bytes = 0;
            for (let i = Math.floor(r.start / CHUNK); i * CHUNK < r.end; i++) {
              if (shared.has(i)) continue;
              bytes += Math.min(r.end, (i + 1) * CHUNK) - Math.max(r.start, i * CHUNK);
            }
            return n + bytes;
          }, 0);
          expect(wave.storeBytes).toBe(direct);
        },
      ),
      {
        numRuns: 150,
        examples: [
          // a lie in a chunk whose inner range it keeps intact, inside a range too long to hold back
          [
            {
              blocks: 160,
              ranges: [
                [0, 1],
                [4, 159],
              ],
            },
            BLOCK,
            [[0, 8 * BLOCK]],
          ],
          // a lie inside a range held back (three chunks): repaired
          [{ blocks: 48, ranges: [[2, 40]] }, 100, [[1, 100]]],
          // a range reaching one block into a sparse chunk is read as it passes
          [{ blocks: 17, ranges: [[0, 16]] }, BLOCK, [[0, 5]]],
        ],
      },
    );
  }, 60_000);
});
