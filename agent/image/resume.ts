import { open } from "node:fs/promises";
import type { Checkpoint, ChecksumValue, ImageSpec } from "../../shared/image.ts";
import type { BlockMap } from "./bmap.ts";
import { HashingTap } from "./checksum.ts";

/** Read size for re-hashing the kept prefix: local reads, far faster than fetching the bytes again. */
const READ_BYTES = 4 * 1024 * 1024;

/** A checkpoint the disk still holds: the whole-image hash carried over its bytes, ready to continue. */
export interface KeptPrefix {
  bytes: number;
  tap: HashingTap;
}

/**
 * Why a checkpoint cannot be resumed from before the disk is read (the write then starts over), or null.
 * Only a raw, uncompressed whole-disk image (streamed whole or by its block map), verified by a whole-image
 * checksum in the checkpoint's algorithm, is resumed: a partition image, a compressed or qcow2 stream (whose
 * checksum is over other bytes than the disk's) are written again from the start.
 */
export function resumeRefusal(
  checkpoint: Checkpoint,
  context: { image: ImageSpec; expected: ChecksumValue | undefined },
): string | null {
  const { image, expected } = context;
  if (expected === undefined) return "the image has no checksum to resume its verification from";
  if (expected.algo !== checkpoint.algo)
    return "the checkpoint's digest is not in the image checksum's algorithm";
  if (image.image_type === "partition") return "a partition image is written again from the start";
  if (image.compression !== undefined && image.compression !== "none")
    return "a compressed image is written again from the start";
  if (image.disk_format === "qcow2") return "a qcow2 image is written again from the start";
  if (image.size !== undefined && checkpoint.bytes > image.size)
    return "the checkpoint is beyond the image's end";
  return null;
}

/**
 * Where a resumed write starts: the checkpoint, or with a block map the start of the mapped range the
 * checkpoint falls inside (a range is fetched whole, so its own digest is checked whole).
 */
export function restartPoint(checkpoint: Checkpoint, map: BlockMap | undefined): number {
  const inside = map?.ranges.find((range) => range.start < checkpoint.bytes && checkpoint.bytes < range.end);
  return inside?.start ?? checkpoint.bytes;
}

/**
 * Re-reads the checkpoint's prefix from the target (at `offset`) and hashes it. The prefix is kept only when
 * its digest is the checkpoint's: a disk changed since (or a write the reboot lost) is written again whole.
 * Returns the kept prefix (its first `restartAt` bytes, default all) with the image hash carried over it, or
 * why it cannot be kept.
 * @throws the read's error (EIO…); the signal's reason when aborted
 */
export async function readKeptPrefix(
  target: string,
  checkpoint: Checkpoint,
  options: { offset: number; signal?: AbortSignal; restartAt?: number },
): Promise<KeptPrefix | { refused: string }> {
  const tap = new HashingTap(checkpoint.algo);
  const restartAt = Math.min(options.restartAt ?? checkpoint.bytes, checkpoint.bytes);
  let kept: HashingTap | undefined = restartAt === 0 ? tap.fork() : undefined;
  const handle = await open(target, "r");
  try {
    const buffer = Buffer.allocUnsafe(READ_BYTES);
    while (tap.bytes < checkpoint.bytes) {
      options.signal?.throwIfAborted();
      // stop once at restartAt, to keep the hash's state there
      const until = kept === undefined ? restartAt : checkpoint.bytes;
      const want = Math.min(READ_BYTES, until - tap.bytes);
      const { bytesRead } = await handle.read(buffer, 0, want, options.offset + tap.bytes);
      if (bytesRead === 0)
        return { refused: `the disk ends before the checkpoint's ${checkpoint.bytes} bytes` };
      tap.update(buffer.subarray(0, bytesRead));
      if (kept === undefined && tap.bytes === restartAt) kept = tap.fork();
    }
  } finally {
    await handle.close();
  }
  if ((await tap.prefixDigest()) !== checkpoint.digest) {
    return { refused: `the disk's first ${checkpoint.bytes} bytes differ from the checkpoint's` };
  }
  return { bytes: restartAt, tap: kept ?? tap };
}
