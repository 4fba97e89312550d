import { constants as zlibConstants, inflateRawSync } from "node:zlib";
import { ImageError } from "./errors.ts";
import type { Extent } from "./extent.ts";
import { ClusterQueue } from "./cluster-queue.ts";
import { peek } from "./peek.ts";

/** "QFI\xfb" */
export const QCOW2_MAGIC = 0x514649fb;

export function isQcow2(head: Buffer): boolean {
  return head.length >= 4 && head.readUInt32BE(0) === QCOW2_MAGIC;
}

const OFFSET_MASK = 0x00fffffffffffe00n;
const L2_COMPRESSED = 1n << 62n;
const L2_ZERO = 1n;
// Incompatible feature bits we can live with: only "dirty" (refcounts may be stale; we ignore refcounts).
const INCOMPAT_DIRTY = 1n;
const INCOMPAT_COMPRESSION_TYPE = 1n << 3n;

interface Header {
  version: number;
  clusterBits: number;
  clusterSize: number;
  virtualSize: number;
  l1Size: number;
  l1Offset: number;
  refcountTableOffset: number;
  refcountTableClusters: number;
  refcountOrder: number;
}

/** A header field that must be a byte offset we can hold in a JS number and that starts a cluster. */
function clusterOffset(value: bigint, what: string, clusterSize: number): number {
  if (value > BigInt(Number.MAX_SAFE_INTEGER) || Number(value) % clusterSize !== 0) {
    throw new ImageError(`qcow2 ${what} offset ${value} is not a cluster boundary`, "image_format");
  }
  return Number(value);
}

/** Parses and vets a qcow2 header. @throws ImageError "qcow2_unsupported" / "image_format" */
export function parseQcow2Header(head: Buffer): Header {
  if (head.length < 72 || !isQcow2(head)) throw new ImageError("not a qcow2 image", "image_format");
  const version = head.readUInt32BE(4);
  if (version !== 2 && version !== 3) {
    throw new ImageError(`qcow2 version ${version} is not supported`, "qcow2_unsupported");
  }
  if (head.readBigUInt64BE(8) !== 0n) {
    throw new ImageError("qcow2 images with a backing file cannot be written alone", "qcow2_unsupported");
  }
  const clusterBits = head.readUInt32BE(20);
  if (clusterBits < 9 || clusterBits > 21) {
    throw new ImageError(`qcow2 cluster_bits ${clusterBits} is invalid`, "image_format");
  }
  if (head.readUInt32BE(32) !== 0)
    throw new ImageError("encrypted qcow2 images are not supported", "qcow2_unsupported");
  let refcountOrder = 4;
  if (version === 3) {
    if (head.length < 104) throw new ImageError("qcow2 v3 header is truncated", "image_format");
    const incompatible = head.readBigUInt64BE(72);
    let unknown = incompatible & ~INCOMPAT_DIRTY;
    if (unknown & INCOMPAT_COMPRESSION_TYPE) {
      const headerLength = head.readUInt32BE(100);
      const type = headerLength > 104 && head.length > 104 ? (head[104] ?? 0) : 0;
      if (type !== 0)
        throw new ImageError("qcow2 zstd-compressed clusters are not supported", "qcow2_unsupported");
      unknown &= ~INCOMPAT_COMPRESSION_TYPE;
    }
    if (unknown !== 0n) {
      // corrupt (bit 1), external data file (bit 2), extended L2 (bit 4), or something newer.
      throw new ImageError(
        `qcow2 incompatible features 0x${unknown.toString(16)} are not supported`,
        "qcow2_unsupported",
      );
    }
    refcountOrder = head.readUInt32BE(96);
    if (refcountOrder > 6) {
      throw new ImageError(`qcow2 refcount_order ${refcountOrder} is invalid`, "image_format");
    }
  }
  const clusterSize = 2 ** clusterBits;
  const virtualSize = head.readBigUInt64BE(24);
  if (virtualSize > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new ImageError(`qcow2 virtual size ${virtualSize} is out of range`, "image_format");
  }
  return {
    version,
    clusterBits,
    clusterSize,
    virtualSize: Number(virtualSize),
    l1Size: head.readUInt32BE(36),
    l1Offset: clusterOffset(head.readBigUInt64BE(40), "L1 table", clusterSize),
    refcountTableOffset: clusterOffset(head.readBigUInt64BE(48), "refcount table", clusterSize),
    refcountTableClusters: head.readUInt32BE(56),
    refcountOrder,
  };
}

export interface Qcow2Limits {
  /**
   * Bytes of image data held while they wait for something that arrives later: clusters ahead of the
   * tables that map them, compressed data ahead of its end. Default 64 MiB.
   */
  maxBufferedBytes?: number;
  /** Memory for table state: the L1 table and mappings announced ahead of their clusters. Default 128 MiB. */
  maxTableBytes?: number;
  /** The largest virtual size accepted (the target's size). Default: no bound. */
  maxVirtualSize?: number;
  /** How many times more L1 and refcount table than the virtual size needs is accepted. Default 4. */
  metadataFactor?: number;
}

export const QCOW2_LIMIT_DEFAULTS = {
  maxBufferedBytes: 64 * 1024 * 1024,
  maxTableBytes: 128 * 1024 * 1024,
  maxVirtualSize: Number.MAX_SAFE_INTEGER,
  metadataFactor: 4,
} as const satisfies Required<Qcow2Limits>;

/**
 * Refuses a header whose tables are out of proportion to its virtual size (or whose virtual size exceeds
 * the target): they would only make us read and track metadata for nothing.
 * @throws ImageError "target" (virtual size), "image_limit" (tables too large), "image_format" (L1 too small)
 */
export function vetQcow2Metadata(header: Header, limits: Required<Qcow2Limits>): void {
  const { clusterSize: cs, virtualSize: vs } = header;
  if (vs > limits.maxVirtualSize) {
    throw new ImageError(`image is ${vs} bytes but the target has ${limits.maxVirtualSize}`, "target");
  }
  const l1Needed = Math.ceil(vs / (cs * (cs / 8)));
  if (header.l1Size < l1Needed) {
    throw new ImageError(
      `qcow2 L1 table has ${header.l1Size} entries; the virtual size needs ${l1Needed}`,
      "image_format",
    );
  }
  const l1Allowed = Math.max(l1Needed * limits.metadataFactor, cs / 8);
  if (header.l1Size > l1Allowed) {
    throw new ImageError(
      `qcow2 L1 table has ${header.l1Size} entries for a virtual size that needs ${l1Needed} ` +
        `(more than ${limits.metadataFactor}x is refused)`,
      "image_limit",
    );
  }
  // Host clusters: every guest cluster plus its share of L2 tables, with room for the rest of the metadata.
  const hostClusters = 2 * Math.ceil(vs / cs) + 64;
  const perRefcountBlock = (cs * 8) / 2 ** header.refcountOrder;
  const tableBytes = Math.ceil(hostClusters / perRefcountBlock) * 8;
  const allowedClusters = Math.max(Math.ceil((tableBytes * limits.metadataFactor) / cs), 16);
  if (header.refcountTableClusters > allowedClusters) {
    throw new ImageError(
      `qcow2 refcount table has ${header.refcountTableClusters} clusters for a virtual size that needs ` +
        `${Math.ceil(tableBytes / cs)} (more than ${limits.metadataFactor}x is refused)`,
      "image_limit",
    );
  }
}

/** Where the queues say a cluster's bytes go; reused to avoid an object per popped entry. */
interface Popped {
  key: number;
  a: number;
  b: number;
}

/** Compressed data that continues past the cluster just seen. */
interface Spill {
  guest: number;
  length: number;
  head: Buffer;
}

/**
 * Converts a qcow2 byte stream into raw extents at their guest offsets while it streams: the header, L1 and
 * L2 tables are parsed as they pass; data clusters (plain or deflate-compressed) are emitted as soon as their
 * mapping is known. Clusters that come before their L2 table are held up to a bound. Unallocated and zero
 * clusters produce nothing: the writer leaves (or fills) them as zeros.
 *
 * Extents are views (of the source's chunks or of the converter's own buffers), valid until the next one is
 * pulled; the source may yield views of reused buffers too, as each chunk is done with before the next is read.
 *
 * Hostile images are bounded: each compressed cluster inflates to at most one cluster (zlib stops there),
 * the bytes emitted never exceed the virtual size, tables out of proportion to the virtual size are refused
 * before they are read, and what is announced ahead (L2 tables, data and compressed clusters not yet passed)
 * lives in typed queues charged to `maxTableBytes`.
 * @throws ImageError "qcow2_unsupported" (backing file, encryption, zstd clusters, extended L2),
 * "qcow2_out_of_order" (held data past its bound), "image_limit" (tables or output past their bounds),
 * "target" (virtual size larger than the target), "image_format" (truncated or corrupt)
 */
export class Qcow2Converter {
  virtualSize = 0;
  /** Bytes zlib produced for compressed clusters. */
  inflatedBytes = 0;
  /** Bytes of guest data emitted. */
  emittedBytes = 0;
  /** The most image data held at once (clusters ahead of their tables, compressed data ahead of its end). */
  peakHeldBytes = 0;
  private header!: Header;
  private readonly limits: Required<Qcow2Limits>;
  /** Bytes reserved for table state (the L1 copy and the queues' capacity). */
  tableBytes = 0;
  private l1Bytes: Buffer | undefined;
  private l1Parsed = false;
  /** host cluster -> L1 index, for L2 tables not yet passed */
  private readonly l2Tables: ClusterQueue;
  /** host cluster -> guest offset, for data clusters not yet passed */
  private readonly dataClusters: ClusterQueue;
  /** host byte offset -> (guest offset, stored length), for compressed data not yet passed */
  private readonly compressed: ClusterQueue;
  /** refcount block host clusters not yet passed (known metadata, never held) */
  private readonly refcountBlocks: ClusterQueue;
  private readonly popped: Popped = { key: 0, a: 0, b: 0 };
  /** clusters seen before anything mapped them */
  private readonly held = new Map<number, Buffer>();
  private heldBytes = 0;
  private spill: Spill[] = [];
  private spillBytes = 0;
  /** The cluster being processed, so a table in it can map data in it. */
  private current: { index: number; data: Buffer } = { index: -1, data: Buffer.alloc(0) };
  private out: Extent[] = [];

  constructor(limits: Qcow2Limits = {}) {
    this.limits = { ...QCOW2_LIMIT_DEFAULTS, ...stripUndefined(limits) };
    const budget = { reserve: (bytes: number): void => this.reserveTable(bytes) };
    this.l2Tables = new ClusterQueue(budget);
    this.dataClusters = new ClusterQueue(budget);
    this.compressed = new ClusterQueue(budget);
    this.refcountBlocks = new ClusterQueue(budget);
  }

  async *extents(source: AsyncIterable<Buffer>): AsyncGenerator<Extent> {
    const { head, stream } = await peek(source, 512);
    this.header = parseQcow2Header(head);
    vetQcow2Metadata(this.header, this.limits);
    this.virtualSize = this.header.virtualSize;
    const cs = this.header.clusterSize;
    this.reserveTable(this.header.l1Size * 8);
    this.l1Bytes = Buffer.alloc(this.header.l1Size * 8);
    if (this.header.l1Size === 0) this.l1Parsed = true;

    let index = 0;
    // One buffer for every cluster that straddles two chunks: what is kept past a cluster is copied (held
    // clusters, spilled compressed data) and extents are consumed before the next cluster is assembled.
    const partial = Buffer.allocUnsafeSlow(cs);
    let partialLength = 0;
    for await (const chunk of stream) {
      let at = 0;
      while (at < chunk.length) {
        if (partialLength === 0 && chunk.length - at >= cs) {
          this.cluster(index++, chunk.subarray(at, at + cs));
          at += cs;
        } else {
          const n = Math.min(cs - partialLength, chunk.length - at);
          chunk.copy(partial, partialLength, at, at + n);
          partialLength += n;
          at += n;
          if (partialLength === cs) {
            this.cluster(index++, partial);
            partialLength = 0;
          }
        }
        yield* this.takeOutput();
      }
    }
    if (partialLength > 0) this.cluster(index++, partial.subarray(0, partialLength));
    this.finish();
    yield* this.takeOutput();
  }

  private reserveTable(bytes: number): void {
    if (this.tableBytes + bytes > this.limits.maxTableBytes) {
      throw new ImageError(
        `qcow2 tables announce more than ${this.limits.maxTableBytes} bytes of mappings ahead of their ` +
          "clusters; convert the image with qemu-img convert -O qcow2 to stream it",
        "image_limit",
      );
    }
    this.tableBytes += bytes;
  }

  private *takeOutput(): Generator<Extent> {
    if (this.out.length === 0) return;
    const ready = this.out;
    this.out = [];
    yield* ready;
  }

  private cluster(k: number, data: Buffer): void {
    const cs = this.header.clusterSize;
    const start = k * cs;
    this.current = { index: k, data };
    let known = k === 0 || this.spill.length > 0;
    this.continueSpill(data);
    const { l1Offset } = this.header;
    if (this.l1Bytes && start < l1Offset + this.l1Bytes.length && start + data.length > l1Offset) {
      known = true;
      const from = Math.max(start, l1Offset);
      const to = Math.min(start + data.length, l1Offset + this.l1Bytes.length);
      data.copy(this.l1Bytes, from - l1Offset, from - start, to - start);
      if (to === l1Offset + this.l1Bytes.length) this.parseL1(k);
    }
    const rtStart = this.header.refcountTableOffset;
    const rtEnd = rtStart + this.header.refcountTableClusters * cs;
    if (start >= rtStart && start < rtEnd) {
      known = true;
      for (let i = 0; i + 8 <= data.length; i += 8) {
        const block = Number(data.readBigUInt64BE(i) & OFFSET_MASK);
        if (block !== 0 && block % cs === 0 && block / cs > k) this.refcountBlocks.push(block / cs, 0);
      }
    }
    const popped = this.popped;
    while (this.refcountBlocks.peekKey() <= k) {
      this.refcountBlocks.pop(popped);
      if (popped.key === k) known = true;
    }
    while (this.l2Tables.peekKey() === k) {
      known = true;
      this.l2Tables.pop(popped);
      this.parseL2(popped.a, data, k);
    }
    while (this.dataClusters.peekKey() === k) {
      known = true;
      this.dataClusters.pop(popped);
      this.emit(popped.a, data);
    }
    while (Math.floor(this.compressed.peekKey() / cs) === k) {
      known = true;
      this.compressed.pop(popped);
      this.compressedAt({ hostOffset: popped.key, guest: popped.a, length: popped.b }, k, data);
    }
    if (!known) this.hold(k, data);
    if (this.allMapped()) this.releaseHeld();
  }

  private allMapped(): boolean {
    return this.l1Parsed && this.l2Tables.size === 0;
  }

  private hold(k: number, data: Buffer): void {
    if (this.allMapped() || isZero(data)) return;
    this.holdBytes(data.length);
    this.held.set(k, Buffer.from(data));
  }

  private holdBytes(bytes: number): void {
    if (this.heldBytes + this.spillBytes + bytes > this.limits.maxBufferedBytes) {
      throw new ImageError(
        `qcow2 data arrives more than ${this.limits.maxBufferedBytes} bytes before the tables that map it; ` +
          "convert the image with qemu-img convert -O qcow2 to stream it",
        "qcow2_out_of_order",
      );
    }
    this.heldBytes += bytes;
    this.peakHeldBytes = Math.max(this.peakHeldBytes, this.heldBytes + this.spillBytes);
  }

  private releaseHeld(): void {
    this.held.clear();
    this.heldBytes = 0;
  }

  private parseL1(k: number): void {
    const l1 = this.l1Bytes;
    if (!l1) return;
    this.l1Bytes = undefined;
    this.l1Parsed = true;
    const cs = this.header.clusterSize;
    for (let i = 0; i < this.header.l1Size; i += 1) {
      const offset = Number(l1.readBigUInt64BE(i * 8) & OFFSET_MASK);
      if (offset === 0) continue;
      if (offset % cs !== 0) {
        throw new ImageError(`qcow2 L1 entry ${i} points inside a cluster (${offset})`, "image_format");
      }
      const table = offset / cs;
      if (table > k) this.l2Tables.push(table, i);
      else {
        // The table passed before the L1 did (or is passing): held, or all zero (it maps nothing).
        const passed = this.clusterBytes(table);
        if (passed) this.parseL2(i, passed, k);
      }
    }
  }

  /** A cluster that passed (or is passing): its bytes if kept, undefined if it was all zeros or dropped. */
  private clusterBytes(c: number): Buffer | undefined {
    return c === this.current.index ? this.current.data : this.held.get(c);
  }

  private parseL2(l1Index: number, table: Buffer, k: number): void {
    const { clusterSize: cs, clusterBits, version } = this.header;
    const entries = cs / 8;
    const offsetBits = BigInt(62 - (clusterBits - 8));
    const offsetMask = (1n << offsetBits) - 1n;
    for (let j = 0; j < entries && j * 8 + 8 <= table.length; j += 1) {
      const entry = table.readBigUInt64BE(j * 8);
      if (entry === 0n) continue;
      const guest = (l1Index * entries + j) * cs;
      if (guest >= this.virtualSize) break;
      if (entry & L2_COMPRESSED) {
        const hostOffset = Number(entry & offsetMask);
        const sectors = Number((entry >> offsetBits) & ((1n << (62n - offsetBits)) - 1n)) + 1;
        const length = sectors * 512 - (hostOffset % 512);
        if (Math.floor(hostOffset / cs) > k) this.compressed.push(hostOffset, guest, length);
        else this.compressedFromPassed({ hostOffset, guest, length }, k);
        continue;
      }
      if (version === 3 && entry & L2_ZERO) continue;
      const host = Number(entry & OFFSET_MASK);
      if (host === 0) continue;
      if (host % cs !== 0) {
        throw new ImageError(
          `qcow2 L2 entry for guest offset ${guest} is not cluster aligned`,
          "image_format",
        );
      }
      const cluster = host / cs;
      if (cluster > k) this.dataClusters.push(cluster, guest);
      else {
        const passed = this.clusterBytes(cluster);
        if (passed) this.emit(guest, passed);
        // else: it was all zeros, which is what an unwritten range reads as.
      }
    }
  }

  /** Compressed data starting in cluster k (its bytes now passing). */
  private compressedAt(ref: CompressedRef, k: number, data: Buffer): void {
    const cs = this.header.clusterSize;
    const from = ref.hostOffset - k * cs;
    if (from + ref.length <= data.length) this.inflate(ref, data.subarray(from, from + ref.length));
    else this.addSpill(ref, data.subarray(from));
  }

  /** Compressed data that started before its L2 table did: assembled from held clusters (and this one). */
  private compressedFromPassed(ref: CompressedRef, k: number): void {
    const cs = this.header.clusterSize;
    const first = Math.floor(ref.hostOffset / cs);
    const parts: Buffer[] = [];
    let c = first;
    for (; c <= k && c * cs < ref.hostOffset + ref.length; c += 1) {
      parts.push(this.clusterBytes(c) ?? Buffer.alloc(cs));
    }
    const from = ref.hostOffset - first * cs;
    const bytes = Buffer.concat(parts).subarray(from, from + ref.length);
    if (bytes.length >= ref.length) this.inflate(ref, bytes);
    else this.addSpill(ref, bytes);
  }

  private addSpill(ref: CompressedRef, head: Buffer): void {
    this.spillBytes += head.length;
    this.holdBytes(0);
    this.spill.push({ guest: ref.guest, length: ref.length, head: Buffer.from(head) });
  }

  /** Feeds the next cluster to the compressed data that continues into it. */
  private continueSpill(data: Buffer): void {
    if (this.spill.length === 0) return;
    const waiting = this.spill;
    this.spill = [];
    this.spillBytes = 0;
    for (const { guest, length, head } of waiting) {
      const bytes = Buffer.concat([head, data.subarray(0, length - head.length)]);
      if (bytes.length >= length) this.inflate({ guest, length, hostOffset: 0 }, bytes);
      else this.addSpill({ guest, length, hostOffset: 0 }, bytes);
    }
  }

  private inflate(ref: CompressedRef, compressed: Buffer): void {
    const cs = this.header.clusterSize;
    let data: Buffer;
    try {
      // The stored length is rounded up to sectors: trailing bytes after the deflate stream are slack.
      // NOTE: maxOutputLength makes zlib stop at one cluster: a bomb fails here instead of filling memory.
      data = inflateRawSync(compressed, { finishFlush: zlibConstants.Z_SYNC_FLUSH, maxOutputLength: cs });
    } catch (error) {
      const tooLarge = (error as { code?: string }).code === "ERR_BUFFER_TOO_LARGE";
      throw new ImageError(
        tooLarge
          ? `qcow2 compressed cluster for guest offset ${ref.guest} inflates past one cluster (${cs} bytes)`
          : `qcow2 compressed cluster for guest offset ${ref.guest} is corrupt: ${(error as Error).message}`,
        tooLarge ? "image_limit" : "image_format",
      );
    }
    this.inflatedBytes += data.length;
    if (data.length < Math.min(cs, this.virtualSize - ref.guest)) {
      throw new ImageError(`qcow2 compressed cluster for guest offset ${ref.guest} is short`, "image_format");
    }
    this.emit(ref.guest, data);
  }

  private emit(guest: number, data: Buffer): void {
    const room = this.virtualSize - guest;
    if (room <= 0) return;
    const piece = data.length > room ? data.subarray(0, room) : data;
    this.emittedBytes += piece.length;
    // Each guest cluster has one L2 entry, so this cannot happen; it is the per-image bound, checked.
    if (this.emittedBytes > this.virtualSize) {
      throw new ImageError(`qcow2 image maps more than its virtual size ${this.virtualSize}`, "image_limit");
    }
    this.out.push({ offset: guest, data: piece });
  }

  private finish(): void {
    const waiting = this.spill;
    this.spill = [];
    for (const { guest, length, head } of waiting) this.inflate({ guest, length, hostOffset: 0 }, head);
    if (!this.l1Parsed || this.l2Tables.size > 0 || this.dataClusters.size > 0 || this.compressed.size > 0) {
      throw new ImageError("qcow2 image is truncated: some mapped clusters never arrived", "image_format");
    }
  }
}

interface CompressedRef {
  hostOffset: number;
  length: number;
  guest: number;
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

const ZERO_PAGE = Buffer.alloc(64 * 1024);
/** memcmp against a zero page, piece by piece. */
export function isZero(data: Buffer): boolean {
  for (let at = 0; at < data.length; at += ZERO_PAGE.length) {
    const piece = data.subarray(at, at + ZERO_PAGE.length);
    if (!piece.equals(ZERO_PAGE.subarray(0, piece.length))) return false;
  }
  return true;
}
