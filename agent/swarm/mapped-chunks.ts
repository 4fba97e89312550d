import { createHash } from "node:crypto";
import type { BlockMap, MappedRange } from "../image/bmap.ts";
import { ImageError } from "../image/errors.ts";
import type { ByteWindow, Extent } from "../image/extent.ts";
import { ImageDownload } from "../image/fetch.ts";
import type { DownloadSession, FetchOptions } from "../image/fetch.ts";
import type { ChunkCheck, SwarmSource, TakenChunk } from "./swarm-source.ts";

/**
 * A chunk is shared through the wave when at least this share of it is mapped. A shared chunk costs the wave
 * one whole chunk from the store; a sparse chunk's ranges cost each node only their own bytes. At 1/8 a
 * node alone in its wave downloads at most 8× the mapped bytes of the chunks it shares, and a wave of 8 or
 * more pays the store no more for them than each node fetching its ranges itself would. (An ext4 image's
 * bitmaps, a few KiB every 128 MiB, stay direct.)
 */
const SHARED_SHARE = 1 / 8;

/**
 * A range with a digest across at most this many shared chunks is checked before any of its bytes is
 * written: a peer's bytes that matched a wrong anchor are then replaced with the store's, not written. A
 * longer range is checked as its bytes pass, and a mismatch fails the write.
 */
export const HOLD_CHUNKS = 8;

/** The pieces the writer gets: small enough to stay in the CPU's cache between its hash and copy. */
const YIELD_BYTES = 256 * 1024;

/** The indices of the chunks (of `chunkBytes`) a block-mapped write takes through the wave, ascending. */
export function sharedChunks(map: BlockMap, chunkBytes: number): number[] {
  const mapped = new Map<number, number>();
  for (const range of map.ranges) {
    for (let index = Math.floor(range.start / chunkBytes); index * chunkBytes < range.end; index++) {
      const overlap =
        Math.min(range.end, (index + 1) * chunkBytes) - Math.max(range.start, index * chunkBytes);
      mapped.set(index, (mapped.get(index) ?? 0) + overlap);
    }
  }
  const shared: number[] = [];
  for (const [index, bytes] of mapped) {
    const length = Math.min(chunkBytes, map.imageSize - index * chunkBytes);
    if (bytes >= SHARED_SHARE * length) shared.push(index);
  }
  return shared;
}

/** The map's ranges that lie wholly inside `window`, in order. */
function rangesWithin(map: BlockMap, window: ByteWindow): MappedRange[] {
  const { ranges } = map;
  let low = 0;
  let high = ranges.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if ((ranges[middle] as MappedRange).start < window.start) low = middle + 1;
    else high = middle;
  }
  const within: MappedRange[] = [];
  for (let i = low; i < ranges.length && (ranges[i] as MappedRange).end <= window.end; i++)
    within.push(ranges[i] as MappedRange);
  return within;
}

function mismatch(map: BlockMap, range: MappedRange, got: { actual: string; why?: string }): ImageError {
  return new ImageError(
    `bytes ${range.start}-${range.end - 1} do not match the block map's ${map.checksumType} ${range.checksum} (got ${got.actual})${got.why ?? ""}`,
    "checksum_mismatch",
    true,
  );
}

/**
 * The block map's digests of the ranges inside a chunk, as a test of a peer's copy of it. Chunks whose
 * digest-carrying ranges all passed are added to `passed` (keyed by their first byte), so their ranges need
 * not be hashed again.
 */
function rangeCheck(map: BlockMap, passed: Set<number>): ChunkCheck {
  const algo = map.checksumType;
  return (window, data) => {
    if (algo === undefined) return undefined;
    let checked = 0;
    for (const range of rangesWithin(map, window)) {
      if (range.checksum === undefined) continue;
      const actual = createHash(algo)
        .update(data.subarray(range.start - window.start, range.end - window.start))
        .digest("hex");
      if (actual !== range.checksum) return mismatch(map, range, { actual }).message;
      checked += 1;
    }
    if (checked > 0) passed.add(window.start);
    return undefined;
  };
}

/** Chunks from the wave by index, in ascending order, held while a range still needs them. */
class HeldChunks {
  private readonly held = new Map<number, TakenChunk>();

  constructor(private readonly source: AsyncGenerator<TakenChunk>) {}

  async take(index: number): Promise<TakenChunk> {
    for (let chunk = this.held.get(index); chunk === undefined; chunk = this.held.get(index)) {
      const next = await this.source.next();
      if (next.done === true) throw new Error(`chunk ${index} was not among the wave's chunks`);
      this.held.set(next.value.index, next.value);
    }
    return this.held.get(index) as TakenChunk;
  }

  replace(chunk: TakenChunk): void {
    this.held.set(chunk.index, chunk);
  }

  releaseBelow(index: number): void {
    for (const [at, chunk] of this.held) {
      if (at >= index) continue;
      chunk.release();
      this.held.delete(at);
    }
  }

  async close(): Promise<void> {
    this.releaseBelow(Number.POSITIVE_INFINITY);
    await this.source.return(undefined);
  }
}

/** What swarmMappedExtents needs of the wave: a SwarmSource (a fake in tests). */
export type MappedChunkSource = Pick<
  SwarmSource,
  "chunkBytes" | "chunks" | "repair" | "countStoreBytes" | "stats"
>;

export interface SwarmMappedOptions {
  swarm: MappedChunkSource;
  fetch: FetchOptions;
  session: DownloadSession;
  onHole?: (bytes: number) => void;
}

/**
 * The mapped ranges of a raw image as extents (views, valid until the next one is pulled), as mappedExtents
 * gives them, but taken through the swarm: the shared chunks (sharedChunks) from peers or the store via the
 * tracker, a sparse chunk's ranges straight from the store. The map's range digests are trusted hashes: a
 * peer's chunk must pass those of the ranges inside it as well as its anchor; a range across a few chunks
 * is checked before it is written (peer chunks that break it are replaced with the store's); a longer one as
 * it passes. Unmapped ranges are never fetched.
 * @throws ImageError "checksum_mismatch" naming the range (and, when peers' bytes were in it, the wave);
 * as ImageDownload or the swarm otherwise
 */
export async function* swarmMappedExtents(
  url: string,
  map: BlockMap,
  options: SwarmMappedOptions,
): AsyncGenerator<Extent> {
  const { swarm } = options;
  const size = swarm.chunkBytes;
  const passed = new Set<number>();
  const shared = sharedChunks(map, size);
  const isShared = new Set(shared);
  const chunks = new HeldChunks(swarm.chunks(shared, rangeCheck(map, passed)));
  let covered = 0;
  try {
    for (const range of map.ranges) {
      if (range.start > covered) options.onHole?.(range.start - covered);
      const first = Math.floor(range.start / size);
      const last = Math.floor((range.end - 1) / size);
      chunks.releaseBelow(first);
      const digest = range.checksum !== undefined && map.checksumType !== undefined;
      let allShared = true;
      for (let index = first; index <= last; index++) allShared &&= isShared.has(index);
      if (digest && allShared && last > first && last - first < HOLD_CHUNKS) {
        yield* checkedFirst(range, { map, chunks, swarm, passed });
      } else {
        yield* asItPasses(url, range, { ...options, map, chunks, passed, isShared, digest });
      }
      covered = range.end;
    }
    if (map.imageSize > covered) options.onHole?.(map.imageSize - covered);
  } finally {
    await chunks.close();
  }
}

interface RangeContext {
  map: BlockMap;
  chunks: HeldChunks;
  swarm: MappedChunkSource;
  /** Chunks (by first byte) whose inner ranges' digests a peer's copy passed. */
  passed: Set<number>;
}

/** The range's pieces of its chunks, in order. */
function* pieces(range: MappedRange, held: readonly TakenChunk[], size: number): Generator<Extent> {
  for (const chunk of held) {
    const start = Math.max(range.start, chunk.index * size);
    const end = Math.min(range.end, (chunk.index + 1) * size);
    for (let at = start; at < end; at += YIELD_BYTES) {
      const to = Math.min(end, at + YIELD_BYTES);
      yield { offset: at, data: chunk.data.subarray(at - chunk.index * size, to - chunk.index * size) };
    }
  }
}

function digestOf(range: MappedRange, held: readonly TakenChunk[], context: RangeContext): string {
  const hash = createHash(context.map.checksumType as string);
  for (const piece of pieces(range, held, context.swarm.chunkBytes)) hash.update(piece.data);
  return hash.digest("hex");
}

/** A range across a few shared chunks: all of them held, its digest checked (peer chunks repaired), then out. */
async function* checkedFirst(range: MappedRange, context: RangeContext): AsyncGenerator<Extent> {
  const { swarm, chunks } = context;
  const size = swarm.chunkBytes;
  const held: TakenChunk[] = [];
  for (let index = Math.floor(range.start / size); index * size < range.end; index++)
    held.push(await chunks.take(index));
  let actual = digestOf(range, held, context);
  if (actual !== range.checksum && held.some((chunk) => chunk.peer !== undefined)) {
    for (const [i, chunk] of held.entries()) {
      if (chunk.peer === undefined) continue;
      const repaired = await swarm.repair(chunk);
      // the store's copy replaces the peer's: its inner ranges are hashed as they pass
      if (repaired !== chunk) context.passed.delete(chunk.index * size);
      chunks.replace(repaired);
      held[i] = repaired;
    }
    actual = digestOf(range, held, context);
  }
  if (actual !== range.checksum) throw mismatch(context.map, range, { actual });
  yield* pieces(range, held, size);
}

/** A range taken as it passes (shared chunks' pieces or the store's), its digest checked at its end. */
async function* asItPasses(
  url: string,
  range: MappedRange,
  context: RangeContext & SwarmMappedOptions & { isShared: Set<number>; digest: boolean },
): AsyncGenerator<Extent> {
  const { swarm, chunks, map } = context;
  const size = swarm.chunkBytes;
  let hash = context.digest ? createHash(map.checksumType as string) : undefined;
  const peers = new Set<string>();
  const inOneChunk = Math.floor(range.start / size) === Math.floor((range.end - 1) / size);
  for (let index = Math.floor(range.start / size); index * size < range.end; index++) {
    const window = {
      start: Math.max(range.start, index * size),
      end: Math.min(range.end, (index + 1) * size),
    };
    if (context.isShared.has(index)) {
      const chunk = await chunks.take(index);
      if (chunk.peer !== undefined) peers.add(chunk.peer);
      // a peer's copy passed this range's digest already (rangeCheck)
      if (inOneChunk && context.passed.has(index * size)) hash = undefined;
      for (const piece of pieces({ ...range, ...window }, [chunk], size)) {
        hash?.update(piece.data);
        yield piece;
      }
      continue;
    }
    const download = new ImageDownload(url, context.fetch, { window, session: context.session });
    let offset = window.start;
    for await (const data of download) {
      hash?.update(data);
      swarm.countStoreBytes(data.length);
      yield { offset, data };
      offset += data.length;
    }
  }
  const actual = hash?.digest("hex");
  if (actual !== undefined && actual !== range.checksum) {
    const why =
      peers.size === 0
        ? ""
        : ` (written in swarm wave ${swarm.stats.wave}, with chunks from peers ${[...peers].join(", ")})`;
    throw mismatch(map, range, { actual, why });
  }
}
