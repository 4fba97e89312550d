import { createHash } from "node:crypto";
import type { Hash } from "node:crypto";
import { CHECKSUM_HEX_LENGTH } from "../../shared/image.ts";
import type { ChecksumAlgo, ChecksumValue } from "../../shared/image.ts";
import { ChecksumMismatchError, ImageError } from "./errors.ts";
import { ParallelHash } from "./parallel-hash.ts";

const ZEROS = Buffer.alloc(1024 * 1024);

/**
 * Hashes the bytes that pass through it, untouched; read `digest()` once the source is exhausted.
 * NOTE: `update` hashes inline; `pass` may hand a fresh hash to a worker thread (ParallelHash), asked once at
 * the first chunk. Receiving and hashing on one thread take the sum of both; the worker pays when a core is
 * free (a 2 GiB deploy 17 % faster at load ~2 on 2 cores) and gains nothing when none is (load 4 and above);
 * figures in docs/images.md.
 */
export class HashingTap {
  private readonly hash: Hash;
  private result: string | undefined;
  /** The worker hashing what `pass` yields, while it runs. */
  private worker: ParallelHash | undefined;
  /** Bytes hashed so far (holes' zeros included). */
  bytes = 0;

  constructor(
    readonly algo: ChecksumAlgo,
    from?: Hash,
  ) {
    this.hash = from ?? createHash(algo);
  }

  /** A tap that goes on from this one's state, this one left as it is. @throws while a worker hashes */
  fork(): HashingTap {
    if (this.worker) throw new Error("a tap hashing on a worker cannot be forked");
    const tap = new HashingTap(this.algo, this.hash.copy());
    tap.bytes = this.bytes;
    return tap;
  }

  /**
   * Yields the source's chunks, hashing each first. `parallel`, asked once at the first chunk (when a download
   * knows its length) of a tap that has hashed nothing yet, hands the hashing to a worker; the digest is ready
   * once the source ends.
   * @throws the source's errors; the worker's error
   */
  async *pass(source: AsyncIterable<Buffer>, parallel?: () => boolean): AsyncGenerator<Buffer> {
    let first = true;
    try {
      for await (const chunk of source) {
        if (first) {
          first = false;
          // a resumed hash's state cannot move to a worker: only a fresh one goes
          if (this.bytes === 0 && this.result === undefined && parallel?.())
            this.worker = new ParallelHash(this.algo);
        }
        if (this.worker) await this.worker.update(chunk);
        else this.hash.update(chunk);
        this.bytes += chunk.length;
        yield chunk;
      }
      if (this.worker) this.result = await this.worker.digest();
    } finally {
      this.worker?.close();
      this.worker = undefined;
    }
  }

  /** @throws while a worker hashes */
  update(chunk: Buffer): void {
    if (this.worker) throw new Error("a tap hashing on a worker takes bytes only through pass");
    this.hash.update(chunk);
    this.bytes += chunk.length;
  }

  /** The digest of the bytes hashed so far, without ending the hash (a checkpoint's). @throws the worker's error */
  async prefixDigest(): Promise<string> {
    return this.worker ? this.worker.prefixDigest() : this.hash.copy().digest("hex");
  }

  /** Hashes `length` zero bytes (a hole a block map skipped). */
  zeros(length: number): void {
    if (this.worker) throw new Error("a tap hashing on a worker takes bytes only through pass");
    this.bytes += length;
    for (let left = length; left > 0; left -= ZEROS.length) {
      this.hash.update(left >= ZEROS.length ? ZEROS : ZEROS.subarray(0, left));
    }
  }

  /** @throws while a worker still hashes */
  digest(): ChecksumValue {
    if (this.worker) throw new Error("the worker's digest is ready once the stream ends");
    this.result ??= this.hash.digest("hex");
    return { algo: this.algo, value: this.result };
  }

  /** @throws ChecksumMismatchError */
  verify(expected: ChecksumValue): ChecksumValue {
    const actual = this.digest();
    if (expected.algo !== actual.algo || expected.value.toLowerCase() !== actual.value) {
      throw new ChecksumMismatchError(expected.algo, expected.value.toLowerCase(), actual.value);
    }
    return actual;
  }
}

const ALGO_BY_LENGTH = new Map<number, ChecksumAlgo>(
  Object.entries(CHECKSUM_HEX_LENGTH).map(([algo, length]) => [length, algo as ChecksumAlgo]),
);

/**
 * Finds an image's digest in a checksum file: sha256sum/md5sum format ("HEX  NAME" or "HEX *NAME"), BSD format
 * ("SHA256 (NAME) = HEX"), or a bare hex digest. With several lines, the one naming the image's file wins.
 * The algorithm follows from the digest's length.
 * @throws ImageError "checksum_file" when no usable digest is found
 */
export function parseChecksumFile(text: string, imageUrl: string): ChecksumValue {
  const wanted = decodeURIComponent(new URL(imageUrl).pathname.split("/").pop() ?? "");
  const entries: { hex: string; name: string | undefined }[] = [];
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const bsd = /^[A-Za-z0-9-]+ ?\((.+)\) ?= ?([0-9a-fA-F]+)$/.exec(line);
    const gnu = /^([0-9a-fA-F]+)(?:\s+\*?(.+))?$/.exec(line);
    if (bsd) entries.push({ hex: bsd[2] ?? "", name: bsd[1] });
    else if (gnu) entries.push({ hex: gnu[1] ?? "", name: gnu[2]?.trim() });
  }
  const baseName = (name: string): string => name.split("/").pop() ?? name;
  const match =
    entries.find((e) => e.name !== undefined && baseName(e.name) === wanted) ??
    (entries.length === 1 ? entries[0] : undefined);
  if (!match) throw new ImageError(`checksum file lists no digest for "${wanted}"`, "checksum_file");
  const algo = ALGO_BY_LENGTH.get(match.hex.length);
  if (!algo) throw new ImageError(`checksum "${match.hex}" has an unknown length`, "checksum_file");
  return { algo, value: match.hex.toLowerCase() };
}
