import { constants as zlibConstants, inflateRawSync } from "node:zlib";
import { ImageError } from "./errors.ts";
import type { Extent } from "./extent.ts";
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
  }
  return {
    version,
    clusterBits,
    clusterSize: 2 ** clusterBits,
    virtualSize: Number(head.readBigUInt64BE(24)),
    l1Size: head.readUInt32BE(36),
    l1Offset: Number(head.readBigUInt64BE(40) & OFFSET_MASK),
    refcountTableOffset: Number(head.readBigUInt64BE(48)),
    refcountTableClusters: head.readUInt32BE(56),
  };
}

interface CompressedRef {
  hostOffset: number;
  length: number;
  guest: number;
}

export interface Qcow2Options {
  /** Data clusters that arrive before the L2 table mapping them are held up to this many bytes. Default 64 MiB. */
  maxBufferedBytes?: number;
}

/**
 * Converts a qcow2 byte stream into raw extents at their guest offsets while it streams: the header, L1 and
 * L2 tables are parsed as they pass; data clusters (plain or deflate-compressed) are emitted as soon as their
 * mapping is known. Clusters that come before their L2 table are held up to a bound. Unallocated and zero
 * clusters produce nothing: the writer leaves (or fills) them as zeros.
 * @throws ImageError "qcow2_unsupported" (backing file, encryption, zstd clusters, extended L2),
 * "qcow2_out_of_order" (bound exceeded), "image_format" (truncated or corrupt)
 */
export class Qcow2Converter {
  virtualSize = 0;
  private header!: Header;
  private readonly maxBuffered: number;
  private l1Bytes: Buffer | undefined;
  private l1Parsed = false;
  /** host cluster index -> L1 index, for L2 tables not yet passed */
  private readonly l2Tables = new Map<number, number>();
  /** host cluster index -> guest offset, for data clusters not yet passed */
  private readonly dataClusters = new Map<number, number>();
  /** host cluster index where the compressed data starts -> refs */
  private readonly compressed = new Map<number, CompressedRef[]>();
  /** clusters seen before anything mapped them */
  private readonly held = new Map<number, Buffer>();
  private heldBytes = 0;
  private refcountBlocks = new Set<number>();
  private spill: { ref: CompressedRef; head: Buffer }[] = [];
  private out: Extent[] = [];

  constructor(options: Qcow2Options = {}) {
    this.maxBuffered = options.maxBufferedBytes ?? 64 * 1024 * 1024;
  }

  async *extents(source: AsyncIterable<Buffer>): AsyncGenerator<Extent> {
    const { head, stream } = await peek(source, 512);
    this.header = parseQcow2Header(head);
    this.virtualSize = this.header.virtualSize;
    const cs = this.header.clusterSize;
    this.l1Bytes = Buffer.alloc(this.header.l1Size * 8);
    if (this.header.l1Size === 0) this.l1Parsed = true;

    let index = 0;
    let partial = Buffer.alloc(cs);
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
            partial = Buffer.alloc(cs);
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

  private *takeOutput(): Generator<Extent> {
    if (this.out.length === 0) return;
    const ready = this.out;
    this.out = [];
    yield* ready;
  }

  private cluster(k: number, data: Buffer): void {
    const cs = this.header.clusterSize;
    const start = k * cs;
    if (this.spill.length > 0) {
      const waiting = this.spill;
      this.spill = [];
      for (const { ref, head } of waiting)
        this.inflate(ref, Buffer.concat([head, data]).subarray(0, ref.length));
    }
    let known = k === 0;
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
        if (block !== 0) this.refcountBlocks.add(block / cs);
      }
    }
    if (this.refcountBlocks.delete(k)) known = true;
    const l1Index = this.l2Tables.get(k);
    if (l1Index !== undefined) {
      known = true;
      this.l2Tables.delete(k);
      this.parseL2(l1Index, data, k);
    }
    const guest = this.dataClusters.get(k);
    if (guest !== undefined) {
      known = true;
      this.dataClusters.delete(k);
      this.emit(guest, data);
    }
    const refs = this.compressed.get(k);
    if (refs) {
      known = true;
      this.compressed.delete(k);
      for (const ref of refs) this.compressedAt(ref, k, data);
    }
    if (!known) this.hold(k, data);
    if (this.allMapped()) this.releaseHeld();
  }

  private allMapped(): boolean {
    return this.l1Parsed && this.l2Tables.size === 0;
  }

  private hold(k: number, data: Buffer): void {
    if (this.allMapped() || isZero(data)) return;
    this.heldBytes += data.length;
    if (this.heldBytes > this.maxBuffered) {
      throw new ImageError(
        `qcow2 data arrives more than ${this.maxBuffered} bytes before the tables that map it; ` +
          "convert the image with qemu-img convert -O qcow2 to stream it",
        "qcow2_out_of_order",
      );
    }
    this.held.set(k, Buffer.from(data));
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
      const table = offset / cs;
      if (table > k) this.l2Tables.set(table, i);
      else {
        // The table passed before the L1 did: it is held (or was all zero, i.e. maps nothing).
        const held = this.held.get(table);
        if (held) this.parseL2(i, held, k);
      }
    }
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
        const ref = { hostOffset, length: sectors * 512 - (hostOffset % 512), guest };
        const startCluster = Math.floor(hostOffset / cs);
        if (startCluster > k) {
          const list = this.compressed.get(startCluster);
          if (list) list.push(ref);
          else this.compressed.set(startCluster, [ref]);
        } else this.compressedFromHeld(ref, startCluster);
        continue;
      }
      if (version === 3 && entry & L2_ZERO) continue;
      const host = Number(entry & OFFSET_MASK);
      if (host === 0) continue;
      const cluster = host / cs;
      if (cluster > k) this.dataClusters.set(cluster, guest);
      else {
        const held = this.held.get(cluster);
        if (held) this.emit(guest, held);
        // else: it was all zeros, which is what an unwritten range reads as.
      }
    }
  }

  /** Compressed data starting in cluster k (its bytes now passing). */
  private compressedAt(ref: CompressedRef, k: number, data: Buffer): void {
    const cs = this.header.clusterSize;
    const from = ref.hostOffset - k * cs;
    if (from + ref.length <= data.length) this.inflate(ref, data.subarray(from, from + ref.length));
    else this.spill.push({ ref, head: Buffer.from(data.subarray(from)) });
  }

  /** Compressed data that passed before its L2 table: assembled from held clusters. */
  private compressedFromHeld(ref: CompressedRef, startCluster: number): void {
    const cs = this.header.clusterSize;
    const parts: Buffer[] = [];
    for (let c = startCluster; c * cs < ref.hostOffset + ref.length; c += 1) {
      parts.push(this.held.get(c) ?? Buffer.alloc(cs));
    }
    const from = ref.hostOffset - startCluster * cs;
    this.inflate(ref, Buffer.concat(parts).subarray(from, from + ref.length));
  }

  private inflate(ref: CompressedRef, compressed: Buffer): void {
    const cs = this.header.clusterSize;
    let data: Buffer;
    try {
      // The stored length is rounded up to sectors: trailing bytes after the deflate stream are slack.
      data = inflateRawSync(compressed, { finishFlush: zlibConstants.Z_SYNC_FLUSH });
    } catch (error) {
      throw new ImageError(
        `qcow2 compressed cluster for guest offset ${ref.guest} is corrupt: ${(error as Error).message}`,
        "image_format",
      );
    }
    if (data.length < Math.min(cs, this.virtualSize - ref.guest)) {
      throw new ImageError(`qcow2 compressed cluster for guest offset ${ref.guest} is short`, "image_format");
    }
    this.emit(ref.guest, data.subarray(0, cs));
  }

  private emit(guest: number, data: Buffer): void {
    const room = this.virtualSize - guest;
    if (room <= 0) return;
    this.out.push({ offset: guest, data: data.length > room ? data.subarray(0, room) : data });
  }

  private finish(): void {
    for (const { ref, head } of this.spill) this.inflate(ref, head);
    this.spill = [];
    if (!this.l1Parsed || this.l2Tables.size > 0 || this.dataClusters.size > 0 || this.compressed.size > 0) {
      throw new ImageError("qcow2 image is truncated: some mapped clusters never arrived", "image_format");
    }
  }
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
