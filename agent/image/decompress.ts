import { Readable } from "node:stream";
import type { ReadableStream as WebReadableStream } from "node:stream/web";
import { createGunzip } from "node:zlib";
import { Decompress as ZstdDecompress } from "fzstd";
import xz from "xz-decompress";
import type { Compression } from "../../shared/image.ts";
import { ImageError } from "./errors.ts";
import { GcPacer } from "./gc-pacer.ts";

/** Bytes needed to recognise every supported compression. */
export const COMPRESSION_MAGIC_BYTES = 6;

/** Recognises gzip (1f 8b), zstd (28 b5 2f fd) and xz (fd 37 7a 58 5a 00) by their magic; anything else is "none". */
export function detectCompression(head: Buffer): Compression {
  if (head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b) return "gzip";
  if (head.length >= 4 && head.readUInt32BE(0) === 0x28b52ffd) return "zstd";
  if (head.length >= 6 && head.subarray(0, 6).equals(Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]))) {
    return "xz";
  }
  return "none";
}

/**
 * Decompresses a stream with bounded memory; output chunks must be treated as read-only (runs of zeros
 * may share one buffer). At most `maxBytes` come out: a small stream of zeros can expand to TiBs, and a
 * qcow2 converter would read them all.
 * @throws ImageError "image_format" on corrupt input, "image_limit" past maxBytes
 */
export function decompress(
  source: AsyncIterable<Buffer>,
  compression: Compression,
  maxBytes = Number.MAX_SAFE_INTEGER,
): AsyncIterable<Buffer> {
  switch (compression) {
    case "none":
      return source;
    case "gzip":
      return bounded(gunzip(source), { what: "gzip", maxBytes });
    case "zstd":
      return bounded(unzstd(source), { what: "zstd", maxBytes });
    case "xz":
      return bounded(unxz(source), { what: "xz", maxBytes });
  }
}

async function* bounded(
  source: AsyncIterable<Buffer>,
  limit: { what: string; maxBytes: number },
): AsyncGenerator<Buffer> {
  let total = 0;
  for await (const chunk of source) {
    total += chunk.length;
    if (total > limit.maxBytes) {
      throw new ImageError(
        `the ${limit.what} stream decompresses to more than ${limit.maxBytes} bytes`,
        "image_limit",
      );
    }
    yield chunk;
  }
}

async function* gunzip(source: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  const input = Readable.from(source, { objectMode: false });
  const inflater = createGunzip({ chunkSize: 256 * 1024 });
  input.on("error", (error) => inflater.destroy(error));
  input.pipe(inflater);
  try {
    for await (const chunk of inflater) yield chunk as Buffer;
  } catch (error) {
    throw asFormatError(error, "gzip");
  } finally {
    input.destroy();
    inflater.destroy();
  }
}

async function* unxz(source: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  const input = Readable.from(source, { objectMode: false });
  const web = Readable.toWeb(input) as unknown as ReadableStream<Uint8Array>;
  const output = new xz.XzReadableStream(web) as unknown as WebReadableStream<Uint8Array>;
  try {
    for await (const chunk of output) yield Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  } catch (error) {
    throw asFormatError(error, "xz");
  } finally {
    input.destroy();
  }
}

// fzstd decodes synchronously, block by block, from whatever it is pushed. A run of highly compressible
// blocks can expand a few KiB of input into GiBs, so input is fed in slices that shrink when the output
// balloons, and all-zero blocks are kept as a count rather than as memory.
const MAX_SLICE = 64 * 1024;
const MIN_SLICE = 512;
const OUTPUT_HIGH_WATER = 8 * 1024 * 1024;
const ZERO_CHUNK = 1024 * 1024;
const zeros = Buffer.alloc(ZERO_CHUNK);

async function* unzstd(source: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  let queue: Buffer[] = [];
  let queued = 0;
  let pendingZeros = 0;
  const flushZeros = (): void => {
    while (pendingZeros > 0) {
      const n = Math.min(pendingZeros, ZERO_CHUNK);
      queue.push(zeros.subarray(0, n));
      pendingZeros -= n;
    }
  };
  // Paced here, inside push(): one push of a few KiB can decode GiBs of zero blocks, each a fresh allocation.
  const pacer = new GcPacer(4 * 1024 * 1024);
  const decoder = new ZstdDecompress((block) => {
    pacer.allocated(block.byteLength);
    const data = Buffer.from(block.buffer, block.byteOffset, block.byteLength);
    if (data.length <= ZERO_CHUNK && data.equals(zeros.subarray(0, data.length))) {
      pendingZeros += data.length;
      return;
    }
    flushZeros();
    queue.push(data);
    queued += data.length;
  });
  let slice = MAX_SLICE;
  // Zero runs are yielded lazily, a MiB at a time, so they never occupy memory.
  function* drain(): Generator<Buffer> {
    const ready = queue;
    queue = [];
    queued = 0;
    yield* ready;
  }
  function* drainZeros(): Generator<Buffer> {
    while (pendingZeros > 0) {
      const n = Math.min(pendingZeros, ZERO_CHUNK);
      pendingZeros -= n;
      yield zeros.subarray(0, n);
    }
  }
  try {
    for await (const chunk of source) {
      for (let at = 0; at < chunk.length;) {
        const piece = chunk.subarray(at, at + slice);
        at += piece.length;
        decoder.push(piece);
        const produced = queued;
        if (produced > OUTPUT_HIGH_WATER) slice = Math.max(MIN_SLICE, slice >> 3);
        else if (produced < OUTPUT_HIGH_WATER / 8) slice = Math.min(MAX_SLICE, slice << 1);
        yield* drain();
      }
      yield* drainZeros();
    }
    decoder.push(new Uint8Array(0), true);
    yield* drain();
    yield* drainZeros();
  } catch (error) {
    throw asFormatError(error, "zstd");
  }
}

function asFormatError(error: unknown, what: string): unknown {
  if (error instanceof ImageError || (error instanceof Error && error.name === "AbortError")) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new ImageError(`${what} stream is corrupt: ${message}`, "image_format");
}
