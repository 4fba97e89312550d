import { constants } from "node:fs";
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
  /**
   * Bytes from `offset` already on the target and kept (a resumed write): with `readsZeroes` false, gaps
   * are zero-filled from here, not from 0. Default 0.
   */
  keep?: number;
}

const SCAN_GRAIN = 64 * 1024;
/** Zeros written per call when filling gaps on a target that does not read zeros. */
const ZERO_FILL_BYTES = 1024 * 1024;
const ZERO_GRAIN = Buffer.alloc(SCAN_GRAIN);
/** O_DIRECT wants memory, offsets and lengths aligned to the logical block size; 4 KiB suits every disk. */
const DIRECT_ALIGN = 4096;

/**
 * Node cannot tell a buffer's address, and O_DIRECT needs it aligned: try 4 KiB writes of zeros at the start
 * of the region still to write (which the image is about to cover anyway) from each 16-byte shift of the buffer until the
 * kernel accepts one. Returns the shift, or undefined when no shift works.
 */
async function probeAlignment(
  direct: FileHandle,
  memory: Buffer,
  position: number,
): Promise<number | undefined> {
  for (let shift = 0; shift < DIRECT_ALIGN; shift += 16) {
    memory.fill(0, shift, shift + DIRECT_ALIGN);
    try {
      await direct.write(memory, shift, DIRECT_ALIGN, position);
      return shift;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EINVAL") return undefined;
    }
  }
  return undefined;
}

/**
 * Writes extents to a target with large positional writes (one in flight while the next block fills), skips
 * all-zero blocks when the target already reads zeros, fills whatever the image does not cover with zeros
 * (when it doesn't) and fsyncs.
 * Gaps are filled as the image passes them: a block that starts beyond the highest byte written so far
 * (the frontier) first zero-fills the gap up to it. A block behind the frontier (qcow2 may map clusters in
 * any order) lands on bytes already written or zeroed, so nothing tracks coverage: O(1) per write, whatever
 * the order, at the cost of zeroing then rewriting what an out-of-order image fills in late (at most the
 * image's size once).
 * Aligned blocks go through O_DIRECT when the target supports it (like dd oflag=direct): measured here,
 * 2 GiB took 1.3 s direct against 14 s through the page cache. Unaligned pieces (an image's tail) and
 * targets without O_DIRECT (tmpfs) use ordinary writes.
 */
export class ImageWriter {
  /** Bytes handed to write(2), i.e. not counting skipped zeros. */
  bytesWritten = 0;
  /** Of those, zeros written into gaps (a target that does not read zeros). */
  zeroFilledBytes = 0;
  /** write(2) calls made. */
  writeCalls = 0;
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
  /** Everything below this (relative to base) is written or zero-filled. */
  private frontier = 0;
  /** Aligned zeros for gap filling, zeroed on first use. */
  private zeros: Buffer | undefined;

  private constructor(
    private readonly handle: FileHandle,
    private readonly direct: { handle: FileHandle; memory: Buffer } | undefined,
    private readonly options: WriterOptions & { memory: Buffer },
  ) {
    this.base = options.offset ?? 0;
    this.limit = options.limit ?? Number.MAX_SAFE_INTEGER;
    this.blockSize = options.blockSize ?? 4 * 1024 * 1024;
    this.stage = options.memory.subarray(0, this.blockSize);
    this.spare = options.memory.subarray(this.blockSize, 2 * this.blockSize);
    this.frontier = options.keep ?? 0;
  }

  private zeroBlock(): Buffer {
    this.zeros ??= this.options.memory.subarray(2 * this.blockSize).fill(0);
    return this.zeros;
  }

  /** @throws the open(2) error (ENOENT, EACCES…) */
  static async open(options: WriterOptions): Promise<ImageWriter> {
    const blockSize = options.blockSize ?? 4 * 1024 * 1024;
    const base = options.offset ?? 0;
    const handle = await open(options.path, "r+");
    const memoryBytes = 2 * blockSize + ZERO_FILL_BYTES;
    const raw = Buffer.allocUnsafeSlow(memoryBytes + DIRECT_ALIGN);
    let direct: { handle: FileHandle; memory: Buffer } | undefined;
    // NOTE: the probe writes zeros: past the kept prefix of a resumed write, never into it
    const probeFrom = Math.ceil((options.keep ?? 0) / DIRECT_ALIGN) * DIRECT_ALIGN;
    if (
      base % DIRECT_ALIGN === 0 &&
      blockSize % DIRECT_ALIGN === 0 &&
      (options.limit ?? Infinity) >= probeFrom + DIRECT_ALIGN
    ) {
      const directHandle = await open(options.path, constants.O_RDWR | constants.O_DIRECT).catch(
        () => undefined,
      );
      const shift = directHandle ? await probeAlignment(directHandle, raw, base + probeFrom) : undefined;
      if (directHandle && shift !== undefined) {
        direct = { handle: directHandle, memory: raw.subarray(shift, shift + memoryBytes) };
      } else await directHandle?.close();
    }
    const memory = direct?.memory ?? raw.subarray(0, memoryBytes);
    return new ImageWriter(handle, direct, { ...options, memory });
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
      // a block that starts off a 4 KiB boundary (a resumed write) ends on one, so the next are O_DIRECT
      const capacity = this.blockSize - ((this.base + this.stageStart) % DIRECT_ALIGN);
      const n = Math.min(capacity - this.stageLength, data.length - at);
      // Bytes the socket read straight into the block (landing()) are in place already.
      if (
        data.buffer !== this.stage.buffer ||
        data.byteOffset + at !== this.stage.byteOffset + this.stageLength
      )
        data.copy(this.stage, this.stageLength, at, at + n);
      this.stageLength += n;
      at += n;
      if (this.stageLength === capacity) await this.flush();
    }
  }

  /**
   * Flushes, zero-fills what the image never covered up to `imageSize` (if the target doesn't read zeros),
   * fsyncs and closes.
   * @throws ImageError "target" when the image (e.g. a qcow2's virtual size) is larger than the target
   */
  async finish(imageSize: number): Promise<void> {
    try {
      if (imageSize > this.limit) {
        throw new ImageError(`image is ${imageSize} bytes but the target has ${this.limit}`, "target");
      }
      await this.flush();
      await this.inflight;
      this.inflight = undefined;
      await this.syncing;
      const size = Math.min(imageSize, this.limit);
      if (!this.options.readsZeroes) await this.fillZeros(this.frontier, size);
      // Skipped zeros at the end of the image must still exist in a file that stands in for a disk.
      const info = await this.handle.stat();
      if (info.isFile() && info.size < this.base + size) await this.handle.truncate(this.base + size);
      await this.direct?.handle.sync();
      await this.handle.sync();
    } finally {
      await this.direct?.handle.close();
      await this.handle.close();
    }
  }

  /**
   * The free end of the block being filled: a source may read the image's next bytes straight into it and
   * hand them to write() as views of it (which then copies nothing). Valid until the next write().
   */
  landing(): Buffer {
    // A block's end is known once it has a start; a new block's bytes past its end are copied by write().
    const end =
      this.stageLength === 0
        ? this.blockSize
        : this.blockSize - ((this.base + this.stageStart) % DIRECT_ALIGN);
    return this.stage.subarray(this.stageLength, end);
  }

  /**
   * Makes everything handed to write() so far durable: the staged block is written and then fdatasync'd.
   * Resolves (once the block is in flight) with `durable`, which settles when those bytes are on the disk;
   * writing goes on meanwhile. Checkpoints' syncs run in order, after any background sync.
   */
  async checkpoint(): Promise<{ durable: Promise<void> }> {
    // NOTE: the staged block is written up to its last 4 KiB boundary only and its tail stays staged: flushed
    // at any byte, every later block would start unaligned and go through the page cache (measured: a 2 GiB
    // deploy 16 % slower). The tail (under 4 KiB) also goes to the disk through the page cache, before any
    // later write (it is chained into `inflight`), and is written again, aligned, with its block.
    const end = this.stageStart + this.stageLength;
    const cut = end - ((this.base + end) % DIRECT_ALIGN);
    if (this.stageLength > 0 && cut > this.stageStart) {
      const tail = Buffer.from(this.stage.subarray(cut - this.stageStart, this.stageLength));
      this.stageLength = cut - this.stageStart;
      await this.flush();
      tail.copy(this.stage, 0);
      this.stageStart = cut;
      this.stageLength = tail.length;
    }
    const written = this.inflight;
    if (this.stageLength > 0) {
      const tail = Buffer.from(this.stage.subarray(0, this.stageLength));
      const at = this.base + this.stageStart;
      const tailWritten = (async () => {
        await written;
        await writeFully(this.handle, tail, at);
      })();
      tailWritten.catch(() => undefined); // surfaced by the next await of inflight
      this.inflight = tailWritten;
    }
    const staged = this.inflight;
    const previous = this.syncing;
    const durable = (async () => {
      await staged;
      await previous;
      await this.handle.datasync();
    })();
    durable.catch(() => undefined); // surfaced to the caller, and by the next await of syncing
    this.syncing = durable;
    return { durable };
  }

  /** Closes without flushing (after a failure). */
  async abort(): Promise<void> {
    await this.inflight?.catch(() => undefined);
    await this.syncing?.catch(() => undefined);
    await this.direct?.handle.close().catch(() => undefined);
    await this.handle.close().catch(() => undefined);
  }

  private async flush(): Promise<void> {
    if (this.stageLength === 0) return;
    const block = this.stage;
    const start = this.stageStart;
    const length = this.stageLength;
    // Swap buffers so the next block fills while this one is written; at most one write in flight.
    await this.inflight;
    if (!this.options.readsZeroes) {
      // Zeros first, awaited: a later out-of-order block may land in this gap and must win.
      if (start > this.frontier) await this.fillZeros(this.frontier, start);
      this.frontier = Math.max(this.frontier, start + length);
    }
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
    const at = this.base + position;
    const direct = this.direct;
    let aligned = 0;
    if (
      direct &&
      at % DIRECT_ALIGN === 0 &&
      data.buffer === direct.memory.buffer &&
      (data.byteOffset - direct.memory.byteOffset) % DIRECT_ALIGN === 0
    ) {
      aligned = data.length - (data.length % DIRECT_ALIGN);
      await writeFully(direct.handle, data.subarray(0, aligned), at);
    }
    if (aligned < data.length) {
      await writeFully(this.handle, data.subarray(aligned), at + aligned);
      this.unsynced += data.length - aligned;
    }
    this.bytesWritten += data.length;
    this.writeCalls += aligned > 0 && aligned < data.length ? 2 : 1;
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

  /** Writes zeros over [start, end) (relative to base); the caller has no write in flight there. */
  private async fillZeros(start: number, end: number): Promise<void> {
    const zeros = this.zeroBlock();
    for (let p = start; p < end; p += zeros.length) {
      const n = Math.min(zeros.length, end - p);
      await this.pwrite(zeros.subarray(0, n), p);
      this.zeroFilledBytes += n;
    }
  }
}

async function writeFully(handle: FileHandle, data: Buffer, position: number): Promise<void> {
  let done = 0;
  while (done < data.length) {
    const { bytesWritten } = await handle.write(data, done, data.length - done, position + done);
    done += bytesWritten;
  }
}
