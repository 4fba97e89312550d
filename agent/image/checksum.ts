import { createHash } from "node:crypto";
import type { Hash } from "node:crypto";
import { CHECKSUM_HEX_LENGTH } from "../../shared/image.ts";
import type { ChecksumAlgo, ChecksumValue } from "../../shared/image.ts";
import { ChecksumMismatchError, ImageError } from "./errors.ts";

const ZEROS = Buffer.alloc(1024 * 1024);

/**
 * Hashes the bytes that pass through it, untouched; read `digest()` once the source is exhausted.
 * NOTE: inline on the receiving thread. Two worker-thread designs (structured-clone copies per chunk; a
 * shared-memory ring, one message per MiB) were measured slower and 20-80 MB heavier on a loaded 2-core
 * machine; they only pay off with idle cores.
 */
export class HashingTap {
  private readonly hash: Hash;
  private result: string | undefined;
  /** Bytes hashed so far (holes' zeros included). */
  bytes = 0;

  constructor(
    readonly algo: ChecksumAlgo,
    from?: Hash,
  ) {
    this.hash = from ?? createHash(algo);
  }

  /** A tap that goes on from this one's state, this one left as it is. */
  fork(): HashingTap {
    const tap = new HashingTap(this.algo, this.hash.copy());
    tap.bytes = this.bytes;
    return tap;
  }

  async *pass(source: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
    for await (const chunk of source) {
      this.hash.update(chunk);
      this.bytes += chunk.length;
      yield chunk;
    }
  }

  update(chunk: Buffer): void {
    this.hash.update(chunk);
    this.bytes += chunk.length;
  }

  /** The digest of the bytes hashed so far, without ending the hash (a checkpoint's). */
  prefixDigest(): string {
    return this.hash.copy().digest("hex");
  }

  /** Hashes `length` zero bytes (a hole a block map skipped). */
  zeros(length: number): void {
    this.bytes += length;
    for (let left = length; left > 0; left -= ZEROS.length) {
      this.hash.update(left >= ZEROS.length ? ZEROS : ZEROS.subarray(0, left));
    }
  }

  digest(): ChecksumValue {
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
