import { randomFillSync } from "node:crypto";
import { open } from "node:fs/promises";
import { ALIGN, openAligned, writeFully } from "./direct-io.ts";
import type { AlignedHandle } from "./direct-io.ts";
import { digest } from "./verify.ts";
import type { Sample } from "./verify.ts";

export interface OverwriteOptions {
  /** File or block device. */
  path: string;
  /** Bytes to overwrite from offset 0 (the disk's size). */
  size: number;
  /** Passes of random data first (shred_random_overwrite_iterations). */
  randomPasses: number;
  /** A last pass of zeros (shred_final_overwrite_with_zeros). */
  finalZeros: boolean;
  /** Regions the verify pass will read: their expected content is captured during the last pass. */
  samples: readonly Sample[];
  signal?: AbortSignal;
  /** Bytes written so far over all passes, and the total. */
  onProgress?: (done: number, total: number) => void;
  /** Size of each write. Default 8 MiB. */
  blockSize?: number;
  /**
   * Writes in flight at once. Default 2. 8 MiB × 2 holds the same 16 MiB as 4 MiB × 4 and costs half the
   * hand-offs to libuv's pool per byte: in the lab's TCG guest, where each costs milliseconds of emulated
   * CPU, it averaged 0.89× dd over four rounds against 0.65× for 4 MiB × 4 (4 MiB × 1: 0.48×); on loop
   * devices on the host the two were even within the noise (1.23/0.89/1.03× against 1.22/1.04/1.13×, and
   * 0.64/0.85× against 0.65/0.80× on a faster, loaded day). See docs/agent.md, "Benchmarks".
   */
  depth?: number;
}

export interface OverwriteResult {
  /** Bytes written over all passes. */
  bytes: number;
  passes: number;
  /** sha256 of each sample as the last pass wrote it, in `samples` order. */
  digests: string[];
}

/**
 * Overwrites the whole target, pass by pass, with large O_DIRECT writes (several in flight, like a deep
 * queue) so the page cache neither slows it nor lies to the verify pass. Random passes fill each block in
 * place from OpenSSL's CSPRNG: measured here 4.7 GB/s, where an AES-CTR cipher's update() (a new buffer per
 * call, then a copy) managed 0.63 GB/s and held the writes back.
 * @throws fs errors (EIO, ENOSPC) as they come; the signal's reason when aborted
 */
export async function overwrite(options: OverwriteOptions): Promise<OverwriteResult> {
  const blockSize = options.blockSize ?? 8 * 1024 * 1024;
  const depth = options.depth ?? 2;
  const passes: Array<"random" | "zeros"> = [
    ...Array.from({ length: options.randomPasses }, () => "random" as const),
    ...(options.finalZeros ? ["zeros" as const] : []),
  ];
  const target = await openAligned(options.path, { bytes: blockSize * depth, write: true });
  const expected = options.samples.map((sample) => Buffer.alloc(sample.length));
  const total = options.size * passes.length;
  let done = 0;
  try {
    for (const [index, pass] of passes.entries()) {
      await writePass(target, {
        ...options,
        blockSize,
        depth,
        pass,
        capture: index === passes.length - 1 ? expected : null,
        onBlock: (bytes) => {
          done += bytes;
          options.onProgress?.(done, total);
        },
      });
    }
  } finally {
    await target.handle.close();
  }
  return { bytes: done, passes: passes.length, digests: expected.map(digest) };
}

interface PassOptions extends OverwriteOptions {
  blockSize: number;
  depth: number;
  pass: "random" | "zeros";
  /** Where to copy the samples' expected bytes (last pass only). */
  capture: Buffer[] | null;
  onBlock(bytes: number): void;
}

async function writePass(target: AlignedHandle, options: PassOptions): Promise<void> {
  const { size, blockSize, depth, pass, signal } = options;
  const slots = Array.from({ length: depth }, (_, i) =>
    target.memory.subarray(i * blockSize, (i + 1) * blockSize),
  );
  if (pass === "zeros") target.memory.fill(0);
  const inflight: Array<Promise<void> | undefined> = Array.from({ length: depth });
  let slot = 0;
  try {
    for (let offset = 0; offset < size; offset += blockSize) {
      signal?.throwIfAborted();
      await inflight[slot];
      const length = Math.min(blockSize, size - offset);
      const block = (slots[slot] as Buffer).subarray(0, length);
      if (pass === "random") randomFillSync(block);
      if (options.capture) capture(options, { block, offset });
      const write = writeBlock(target, { block, offset, path: options.path }).then(() =>
        options.onBlock(length),
      );
      write.catch(() => undefined); // surfaced by the await of this slot
      inflight[slot] = write;
      slot = (slot + 1) % depth;
    }
    await Promise.all(inflight);
  } finally {
    // Never close the handle under a write still in flight (an abort or a failed write leaves some).
    await Promise.allSettled(inflight);
  }
  await target.handle.datasync();
}

/** Copies the parts of samples that fall inside this block into their expected buffers. */
function capture(options: PassOptions, at: { block: Buffer; offset: number }): void {
  const { block, offset } = at;
  for (const [i, sample] of options.samples.entries()) {
    const start = Math.max(sample.offset, offset);
    const end = Math.min(sample.offset + sample.length, offset + block.length);
    if (start >= end) continue;
    block.copy(options.capture?.[i] as Buffer, start - sample.offset, start - offset, end - offset);
  }
}

/** Aligned part through O_DIRECT; an unaligned tail (a 512-byte-sector disk's last sectors) buffered. */
async function writeBlock(
  target: AlignedHandle,
  at: { block: Buffer; offset: number; path: string },
): Promise<void> {
  const { block, offset } = at;
  if (!target.direct || block.length % ALIGN === 0) return writeFully(target.handle, block, offset);
  const aligned = block.length - (block.length % ALIGN);
  await writeFully(target.handle, block.subarray(0, aligned), offset);
  const buffered = await open(at.path, "r+");
  try {
    await writeFully(buffered, block.subarray(aligned), offset + aligned);
    await buffered.datasync();
  } finally {
    await buffered.close();
  }
}
