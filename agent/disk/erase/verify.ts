import { createHash, randomInt } from "node:crypto";
import { ALIGN, openAligned, readFully } from "./direct-io.ts";

/** A region read back after an erase. */
export interface Sample {
  offset: number;
  length: number;
}

const MIB = 1024 * 1024;
const SAMPLE_BYTES = 64 * 1024;
const RANDOM_SAMPLES = 64;

/**
 * Where to look: the first and last MiB (where partition tables, RAID superblocks and boot loaders live)
 * and `count` random 64 KiB blocks, aligned so O_DIRECT can read them.
 */
export function planSamples(size: number, count = RANDOM_SAMPLES): Sample[] {
  if (size <= 2 * MIB) return size === 0 ? [] : [{ offset: 0, length: size }];
  const tail = size - MIB;
  const samples: Sample[] = [
    { offset: 0, length: MIB },
    { offset: tail - (tail % ALIGN), length: size - (tail - (tail % ALIGN)) },
  ];
  const slots = Math.floor((size - SAMPLE_BYTES) / ALIGN);
  for (let i = 0; i < count && slots > 0; i++) {
    samples.push({ offset: randomInt(0, Math.min(slots, 2 ** 47)) * ALIGN, length: SAMPLE_BYTES });
  }
  return samples.sort((a, b) => a.offset - b.offset);
}

/** What a sample should hold after the erase. */
export type Expectation =
  | { kind: "zeros" }
  /** The digests of what the last overwrite pass wrote, sample by sample. */
  | { kind: "digests"; digests: readonly string[] }
  /** The digests read before a firmware erase: a sample that held data must no longer match. */
  | { kind: "changed"; before: readonly string[] };

export interface VerifyResult {
  ok: boolean;
  checked: number;
  /** Samples whose content was not what the erase should have left. */
  bad: Sample[];
}

export const digest = (data: Buffer): string => createHash("sha256").update(data).digest("hex");

/** sha256 of each sample as it reads now (O_DIRECT where possible: the page cache may predate the erase). */
export async function sampleDigests(
  path: string,
  samples: readonly Sample[],
  signal?: AbortSignal,
): Promise<string[]> {
  const digests: string[] = [];
  await readSamples(path, { samples, each: (data) => void digests.push(digest(data)), signal });
  return digests;
}

/**
 * Reads every sample back and checks it against the expectation.
 * @throws fs errors (EIO) as they come; the signal's reason when aborted
 */
export async function verifySamples(
  path: string,
  samples: readonly Sample[],
  options: { expect: Expectation; signal?: AbortSignal },
): Promise<VerifyResult> {
  const { expect } = options;
  const bad: Sample[] = [];
  let index = 0;
  await readSamples(path, {
    samples,
    each: (data) => {
      const sample = samples[index] as Sample;
      if (!matches(data, { expect, index })) bad.push(sample);
      index++;
    },
    signal: options.signal,
  });
  return { ok: bad.length === 0, checked: samples.length, bad };
}

function matches(data: Buffer, at: { expect: Expectation; index: number }): boolean {
  const { expect, index } = at;
  switch (expect.kind) {
    case "zeros":
      return isZero(data);
    case "digests":
      return digest(data) === expect.digests[index];
    case "changed": {
      // A block of zeros or ones held no data before; firmware erase may leave either pattern.
      const before = expect.before[index];
      return isUniform(data) || before !== digest(data) || before === undefined;
    }
  }
}

const ZEROS = Buffer.alloc(MIB);

export function isZero(data: Buffer): boolean {
  for (let at = 0; at < data.length; at += ZEROS.length) {
    const piece = data.subarray(at, at + ZEROS.length);
    if (!piece.equals(ZEROS.subarray(0, piece.length))) return false;
  }
  return true;
}

function isUniform(data: Buffer): boolean {
  const first = data[0];
  return first !== undefined && (first === 0 || first === 0xff) && data.every((byte) => byte === first);
}

async function readSamples(
  path: string,
  read: { samples: readonly Sample[]; each: (data: Buffer) => void; signal?: AbortSignal },
): Promise<void> {
  const { samples, each, signal } = read;
  const largest = samples.reduce((max, sample) => Math.max(max, sample.length), 0);
  const bytes = Math.ceil(largest / ALIGN) * ALIGN + ALIGN;
  const { handle, memory } = await openAligned(path, { bytes, write: false });
  try {
    for (const sample of samples) {
      signal?.throwIfAborted();
      // O_DIRECT reads whole aligned blocks: read the aligned blocks around the sample and cut it out.
      const start = sample.offset - (sample.offset % ALIGN);
      const length = Math.ceil((sample.offset + sample.length - start) / ALIGN) * ALIGN;
      const read = await readFully(handle, memory.subarray(0, length), start);
      const skip = sample.offset - start;
      each(memory.subarray(skip, Math.max(skip, Math.min(read, skip + sample.length))));
    }
  } finally {
    await handle.close();
  }
}
