import { open } from "node:fs/promises";
import type { FileHandle } from "node:fs/promises";
import { ImageError } from "./errors.ts";
import type { Extent } from "./extent.ts";

export interface WriterOptions {
  /** File or block device. */
  path: string;
  /** Where the image starts on the target (a partition's start). Default 0. */
  offset?: number;
  /** Bytes available from `offset` (a partition's or disk's size); undefined: unbounded (a growing file). */
  limit?: number;
  /** The target region reads as zeros already (fresh file, discarded/zeroed device): all-zero blocks are skipped. */
  readsZeroes: boolean;
  /** Size of each write. Default 4 MiB. */
  blockSize?: number;
  /** Start a background fdatasync after this many bytes written, so writeback overlaps the download. Default 64 MiB. */
  syncEvery?: number;
}

const SCAN_GRAIN = 64 * 1024;
const ZERO_GRAIN = Buffer.alloc(SCAN_GRAIN);

/**
 * Writes extents to a target with large positional writes (one in flight while the next block fills), skips
 * all-zero blocks when the target already reads zeros, and at the end fills whatever was never written
 * with zeros (when it doesn't) and fsyncs.
 */
export class ImageWriter {
  /** Bytes handed to write(2), i.e. not counting skipped zeros. */
  bytesWritten = 0;
  private stage: Buffer;
  private spare: Buffer;
  private stageStart = 0;
  private stageLength = 0;
  private inflight: Promise<unknown> | undefined;
  private syncing: Promise<unknown> | undefined;
  private unsynced = 0;
  private readonly base: number;
  private readonly limit: number;
  private readonly blockSize: number;
  /** Sorted, disjoint [start, end) ranges the image has covered (relative to base). */
  private readonly covered: [number, number][] = [];

  private constructor(
    private readonly handle: FileHandle,
    private readonly options: WriterOptions,
  ) {
    this.base = options.offset ?? 0;
    this.limit = options.limit ?? Number.MAX_SAFE_INTEGER;
    this.blockSize = options.blockSize ?? 4 * 1024 * 1024;
    this.stage = Buffer.allocUnsafe(this.blockSize);
    this.spare = Buffer.allocUnsafe(this.blockSize);
  }

  /** @throws the open(2) error (ENOENT, EACCES…) */
  static async open(options: WriterOptions): Promise<ImageWriter> {
    return new ImageWriter(await open(options.path, "r+"), options);
  }

  /** @throws ImageError "target" when the extent does not fit the target */
  async write(extent: Extent): Promise<void> {
    const { offset, data } = extent;
    if (offset + data.length > this.limit) {
      throw new ImageError(
        `image needs ${offset + data.length} bytes but the target has ${this.limit}`,
        "target",
      );
    }
    if (this.stageLength > 0 && offset !== this.stageStart + this.stageLength) await this.flush();
    let at = 0;
    while (at < data.length) {
      if (this.stageLength === 0) this.stageStart = offset + at;
      const n = Math.min(this.blockSize - this.stageLength, data.length - at);
      data.copy(this.stage, this.stageLength, at, at + n);
      this.stageLength += n;
      at += n;
      if (this.stageLength === this.blockSize) await this.flush();
    }
  }

  /**
   * Flushes, zero-fills what the image never covered up to `imageSize` (if the target doesn't read zeros),
   * fsyncs and closes.
   */
  async finish(imageSize: number): Promise<void> {
    try {
      await this.flush();
      await this.inflight;
      this.inflight = undefined;
      await this.syncing;
      const size = Math.min(imageSize, this.limit);
      if (!this.options.readsZeroes) await this.fillGaps(size);
      // Skipped zeros at the end of the image must still exist in a file that stands in for a disk.
      const info = await this.handle.stat();
      if (info.isFile() && info.size < this.base + size) await this.handle.truncate(this.base + size);
      await this.handle.sync();
    } finally {
      await this.handle.close();
    }
  }

  /** Closes without flushing (after a failure). */
  async abort(): Promise<void> {
    await this.inflight?.catch(() => undefined);
    await this.syncing?.catch(() => undefined);
    await this.handle.close().catch(() => undefined);
  }

  private async flush(): Promise<void> {
    if (this.stageLength === 0) return;
    const block = this.stage;
    const start = this.stageStart;
    const length = this.stageLength;
    this.cover(start, start + length);
    // Swap buffers so the next block fills while this one is written; at most one write in flight.
    await this.inflight;
    this.stage = this.spare;
    this.spare = block;
    this.stageLength = 0;
    const write = this.writeBlock(block.subarray(0, length), start);
    write.catch(() => undefined); // surfaced by the next await of inflight
    this.inflight = write;
  }

  private async writeBlock(block: Buffer, start: number): Promise<void> {
    if (!this.options.readsZeroes) return this.pwrite(block, start);
    // Write only the runs of non-zero grains.
    let runStart = -1;
    for (let at = 0; at <= block.length; at += SCAN_GRAIN) {
      const grain = block.subarray(at, at + SCAN_GRAIN);
      const zero = grain.length === 0 || grain.equals(ZERO_GRAIN.subarray(0, grain.length));
      if (!zero && runStart < 0) runStart = at;
      if (zero && runStart >= 0) {
        await this.pwrite(block.subarray(runStart, at), start + runStart);
        runStart = -1;
      }
    }
    if (runStart >= 0) await this.pwrite(block.subarray(runStart), start + runStart);
  }

  private async pwrite(data: Buffer, position: number): Promise<void> {
    let done = 0;
    while (done < data.length) {
      const { bytesWritten } = await this.handle.write(
        data,
        done,
        data.length - done,
        this.base + position + done,
      );
      done += bytesWritten;
    }
    this.bytesWritten += data.length;
    this.unsynced += data.length;
    if (this.unsynced >= (this.options.syncEvery ?? 64 * 1024 * 1024)) await this.syncInBackground();
  }

  /**
   * Page-cache writes are fast and the final fsync would then wait for all of them: flushing as we go keeps
   * the disk busy while the network is, and bounds the dirty pages. One sync at a time.
   */
  private async syncInBackground(): Promise<void> {
    this.unsynced = 0;
    await this.syncing;
    const sync = this.handle.datasync();
    sync.catch(() => undefined); // surfaced by the next await of syncing
    this.syncing = sync;
  }

  private cover(start: number, end: number): void {
    const last = this.covered[this.covered.length - 1];
    if (!last || start > last[1]) return void this.covered.push([start, end]);
    if (start >= last[0]) return void (last[1] = Math.max(last[1], end));
    this.covered.push([start, end]);
    // Out of order (qcow2 can map clusters in any order): sort and merge.
    this.covered.sort((a, b) => a[0] - b[0]);
    const merged: [number, number][] = [];
    for (const range of this.covered) {
      const top = merged[merged.length - 1];
      if (top && range[0] <= top[1]) top[1] = Math.max(top[1], range[1]);
      else merged.push([range[0], range[1]]);
    }
    this.covered.splice(0, this.covered.length, ...merged);
  }

  private async fillGaps(size: number): Promise<void> {
    const zeros = Buffer.alloc(this.blockSize);
    let at = 0;
    const gaps: [number, number][] = [];
    for (const [start, end] of this.covered) {
      if (start > at) gaps.push([at, Math.min(start, size)]);
      at = Math.max(at, end);
    }
    if (at < size) gaps.push([at, size]);
    for (const [start, end] of gaps) {
      for (let p = start; p < end; p += zeros.length) {
        await this.pwrite(zeros.subarray(0, Math.min(zeros.length, end - p)), p);
      }
    }
  }
}
