import { createHash } from "node:crypto";
import type { Logger } from "../../shared/log.ts";
import type { BlockMap } from "./bmap.ts";
import { detectCompression } from "./decompress.ts";
import { ImageError } from "./errors.ts";
import type { Extent } from "./extent.ts";
import { ImageDownload } from "./fetch.ts";
import type { FetchOptions, DownloadSession } from "./fetch.ts";
import { isQcow2 } from "./qcow2.ts";

/**
 * Whether the object at `url` is the raw image the block map describes: same size, answers Range requests,
 * and neither compressed nor qcow2 (a map describes the raw bytes, so those must be streamed whole instead).
 * The probe's connection stays in the session for the ranges.
 */
export async function mapFitsObject(
  url: string,
  map: BlockMap,
  options: { fetch: FetchOptions; session: DownloadSession; logger: Logger },
): Promise<boolean> {
  const probe = new ImageDownload(url, options.fetch, {
    window: { start: 0, end: Math.min(8, map.imageSize) },
    session: options.session,
  });
  const parts: Buffer[] = [];
  try {
    for await (const chunk of probe) parts.push(Buffer.from(chunk));
  } catch (error) {
    if (!(error instanceof ImageError) || error.code !== "http_range") throw error;
    options.logger.warn({ reason: error.message }, "image server ignores Range: block map not used");
    return false;
  }
  const head = Buffer.concat(parts);
  const size = options.session.objectSize;
  const why =
    size !== map.imageSize
      ? `the object has ${size ?? "an unknown number of"} bytes, the map describes ${map.imageSize}`
      : detectCompression(head) !== "none" || isQcow2(head)
        ? "the object is compressed or qcow2"
        : undefined;
  if (why !== undefined) options.logger.warn({ reason: why }, "block map does not fit the image: not used");
  return why === undefined;
}

/**
 * The mapped ranges of a raw image as extents (views, valid until the next one is pulled), downloaded over
 * the session's keep-alive connection, each range checked against the map's digest once complete.
 * `onHole` hears of every unmapped gap, in order, so a whole-image checksum can count its zeros.
 * @throws ImageError "checksum_mismatch" naming the range; as ImageDownload otherwise
 */
export async function* mappedExtents(
  url: string,
  map: BlockMap,
  options: {
    fetch: FetchOptions;
    session: DownloadSession;
    onHole?: (bytes: number) => void;
    /** A resumed write: the image's first bytes are on the disk already (never inside a range). */
    from?: number;
  },
): AsyncGenerator<Extent> {
  let covered = options.from ?? 0;
  for (const range of map.ranges) {
    if (range.end <= covered) continue;
    if (range.start < covered) throw new Error(`a resumed block map write cannot start inside a range`);
    if (range.start > covered) options.onHole?.(range.start - covered);
    const hash =
      range.checksum !== undefined && map.checksumType !== undefined
        ? createHash(map.checksumType)
        : undefined;
    const download = new ImageDownload(url, options.fetch, { window: range, session: options.session });
    let offset = range.start;
    for await (const data of download) {
      hash?.update(data);
      yield { offset, data };
      offset += data.length;
    }
    const actual = hash?.digest("hex");
    if (actual !== undefined && actual !== range.checksum) {
      throw new ImageError(
        `bytes ${range.start}-${range.end - 1} do not match the block map's ${map.checksumType} ${range.checksum} (got ${actual})`,
        "checksum_mismatch",
        true,
      );
    }
    covered = range.end;
  }
  if (map.imageSize > covered) options.onHole?.(map.imageSize - covered);
}
