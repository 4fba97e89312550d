import { createHash, getHashes } from "node:crypto";
import { ImageError } from "./errors.ts";
import type { ByteWindow } from "./extent.ts";

/**
 * A block map in bmaptool's format (`bmaptool create`, and the `.bmap` files Yocto publishes beside its
 * `.wic` images): which blocks of a raw image hold data. Everything else is a hole that reads as zeros,
 * so a deploy downloads and writes only the mapped ranges.
 */
export interface BlockMap {
  imageSize: number;
  blockSize: number;
  /** Hash algorithm of the per-range checksums (sha256 since format 2.0, sha1 before). */
  checksumType: string | undefined;
  /** Mapped byte ranges, sorted and disjoint; `end` is exclusive and never past imageSize. */
  ranges: MappedRange[];
  mappedBytes: number;
}

/** A mapped byte range: `end` is exclusive. */
export interface MappedRange extends ByteWindow {
  /** Hex digest of the range's bytes, when the map carries one. */
  checksum: string | undefined;
}

function element(xml: string, name: string): string | undefined {
  return new RegExp(`<${name}>\\s*([^<]*?)\\s*</${name}>`).exec(xml)?.[1];
}

function integer(xml: string, name: string, required = true): number | undefined {
  const text = element(xml, name);
  if (text === undefined && !required) return undefined;
  if (text === undefined || !/^\d+$/.test(text)) throw bad(`<${name}> is missing or not a number`);
  return Number(text);
}

const bad = (message: string): ImageError => new ImageError(`block map: ${message}`, "image_format");

/**
 * Parses a bmaptool block map (format 1.x or 2.x) and checks its own checksum when it has one.
 * @throws ImageError "image_format" for anything malformed, inconsistent or corrupted
 */
export function parseBlockMap(xml: string): BlockMap {
  const version = /<bmap\s+version\s*=\s*"(\d+)\.(\d+)"\s*>/.exec(xml);
  if (!version) throw bad("no <bmap version=...> element; is this a bmaptool .bmap file?");
  if (version[1] !== "1" && version[1] !== "2")
    throw bad(`format version ${version[1]}.${version[2]} is unknown`);
  const imageSize = integer(xml, "ImageSize") as number;
  const blockSize = integer(xml, "BlockSize") as number;
  const blocksCount = integer(xml, "BlocksCount") as number;
  if (blockSize === 0 || blockSize % 512 !== 0) throw bad(`block size ${blockSize} is not a multiple of 512`);
  if (Math.ceil(imageSize / blockSize) !== blocksCount) {
    throw bad(`${blocksCount} blocks of ${blockSize} bytes do not make an image of ${imageSize} bytes`);
  }
  const declared = element(xml, "ChecksumType")?.toLowerCase();
  // 1.3 named per-range SHA-1 digests "sha1"; 1.4 and later say "chksum" with the type given once.
  const checksumType = declared ?? (/<Range\s[^>]*\bsha1\s*=/.test(xml) ? "sha1" : undefined);
  if (checksumType !== undefined && !getHashes().includes(checksumType)) {
    throw bad(`checksum type "${checksumType}" is not supported`);
  }
  verifyOwnChecksum(xml, checksumType);

  const ranges: MappedRange[] = [];
  let mappedBytes = 0;
  const rangePattern = /<Range\b([^>]*)>\s*(\d+)(?:\s*-\s*(\d+))?\s*<\/Range>/g;
  for (const match of xml.matchAll(rangePattern)) {
    const first = Number(match[2]);
    const last = match[3] === undefined ? first : Number(match[3]);
    if (last < first || last >= blocksCount) throw bad(`range ${first}-${last} is outside the image`);
    const previous = ranges[ranges.length - 1];
    const start = first * blockSize;
    if (previous && start < previous.end) throw bad(`range ${first}-${last} overlaps or is out of order`);
    const end = Math.min((last + 1) * blockSize, imageSize);
    const checksum = /\b(?:chksum|sha1)\s*=\s*"([0-9a-fA-F]+)"/.exec(match[1] ?? "")?.[1]?.toLowerCase();
    ranges.push({ start, end, checksum });
    mappedBytes += end - start;
  }
  const mappedCount = integer(xml, "MappedBlocksCount", false);
  const counted = ranges.reduce((n, r) => n + Math.ceil((r.end - r.start) / blockSize), 0);
  if (mappedCount !== undefined && mappedCount !== counted) {
    throw bad(`it declares ${mappedCount} mapped blocks but its ranges hold ${counted}`);
  }
  return { imageSize, blockSize, checksumType, ranges, mappedBytes };
}

/** The map's digest of itself, computed with its own digest field set to zeros (bmaptool's convention). */
function verifyOwnChecksum(xml: string, checksumType: string | undefined): void {
  const field = /<(BmapFileChecksum|BmapFileSHA1)>\s*([0-9a-fA-F]+)\s*<\//.exec(xml);
  if (!field) return;
  const value = field[2] ?? "";
  const algo = field[1] === "BmapFileSHA1" ? "sha1" : (checksumType ?? "sha256");
  const zeroed = xml.replace(value, "0".repeat(value.length));
  const actual = createHash(algo).update(zeroed).digest("hex");
  if (actual !== value.toLowerCase()) throw bad(`its own ${algo} checksum does not match: corrupted?`);
}
