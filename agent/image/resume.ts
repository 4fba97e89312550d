import { open } from "node:fs/promises";
import type { Checkpoint, ChecksumValue, ImageSpec } from "../../shared/image.ts";
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
 * Only a raw, uncompressed whole-disk image streamed from its start, verified by a whole-image checksum in
 * the checkpoint's algorithm, is resumed: a block map, a partition image, a compressed or qcow2 stream
 * (whose checksum is over other bytes than the disk's) are written again from the start.
 */
export function resumeRefusal(
  checkpoint: Checkpoint,
  context: { image: ImageSpec; expected: ChecksumValue | undefined; mapped: boolean },
): string | null {
  const { image, expected, mapped } = context;
  if (expected === undefined) return "the image has no checksum to resume its verification from";
  if (expected.algo !== checkpoint.algo)
    return "the checkpoint's digest is not in the image checksum's algorithm";
  if (image.image_type === "partition") return "a partition image is written again from the start";
  if (mapped) return "a block-mapped write is written again from the start";
  if (image.compression !== undefined && image.compression !== "none")
    return "a compressed image is written again from the start";
  if (image.disk_format === "qcow2") return "a qcow2 image is written again from the start";
  if (image.size !== undefined && checkpoint.bytes > image.size)
    return "the checkpoint is beyond the image's end";
  return null;
}

/**
 * Re-reads the checkpoint's prefix from the target (at `offset`) and hashes it. The prefix is kept only when
 * its digest is the checkpoint's: a disk changed since (or a write the reboot lost) is written again whole.
 * Returns the kept prefix with the image hash carried over it, or why it cannot be kept.
 * @throws the read's error (EIO…); the signal's reason when aborted
 */
export async function readKeptPrefix(
  target: string,
  checkpoint: Checkpoint,
  options: { offset: number; signal?: AbortSignal },
): Promise<KeptPrefix | { refused: string }> {
  const tap = new HashingTap(checkpoint.algo);
  const handle = await open(target, "r");
  try {
    const buffer = Buffer.allocUnsafe(READ_BYTES);
    while (tap.bytes < checkpoint.bytes) {
      options.signal?.throwIfAborted();
      const want = Math.min(READ_BYTES, checkpoint.bytes - tap.bytes);
      const { bytesRead } = await handle.read(buffer, 0, want, options.offset + tap.bytes);
      if (bytesRead === 0)
        return { refused: `the disk ends before the checkpoint's ${checkpoint.bytes} bytes` };
      tap.update(buffer.subarray(0, bytesRead));
    }
  } finally {
    await handle.close();
  }
  if (tap.prefixDigest() !== checkpoint.digest) {
    return { refused: `the disk's first ${checkpoint.bytes} bytes differ from the checkpoint's` };
  }
  return { bytes: checkpoint.bytes, tap };
}
