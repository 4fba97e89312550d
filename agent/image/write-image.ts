import { availableParallelism } from "node:os";
import type { Logger } from "../../shared/log.ts";
import { silentLogger } from "../../shared/log.ts";
import { WriteImageRequestSchema } from "../../shared/image.ts";
import type {
  ChecksumValue,
  DiskFormat,
  ImageLimits,
  ImageProgress,
  ImageSpec,
  PartitionInfo,
  WriteImageRequest,
  WriteImageResult,
} from "../../shared/image.ts";
import { eraseDeviceMetadata } from "../disk/erase-metadata.ts";
import { appendConfigDrivePartition, createPartitionLayout } from "../disk/partition-table.ts";
import { inspectTarget, rereadPartitions, zeroCheaply } from "../disk/target.ts";
import { parseBlockMap } from "./bmap.ts";
import type { BlockMap } from "./bmap.ts";
import { HashingTap, parseChecksumFile } from "./checksum.ts";
import { decodeConfigDrive, writeConfigDrive } from "./configdrive.ts";
import { COMPRESSION_MAGIC_BYTES, decompress, detectCompression } from "./decompress.ts";
import { ChecksumMismatchError, ImageError, redactQuery } from "./errors.ts";
import { rawExtents } from "./extent.ts";
import type { Extent } from "./extent.ts";
import { DownloadSession, fetchSmall, fetchText, ImageDownload, ownedChunks } from "./fetch.ts";
import type { FetchOptions } from "./fetch.ts";
import { peek } from "./peek.ts";
import { GcPacer } from "./gc-pacer.ts";
import { mapFitsObject, mappedExtents } from "./mapped-image.ts";
import { isQcow2, Qcow2Converter } from "./qcow2.ts";
import type { Qcow2Limits } from "./qcow2.ts";
import { ProgressMeter } from "./progress.ts";
import { readKeptPrefix, restartPoint, resumeRefusal } from "./resume.ts";
import type { KeptPrefix } from "./resume.ts";
import { ImageWriter } from "./writer.ts";
import { swarmMappedExtents } from "../swarm/mapped-chunks.ts";
import { openSwarm } from "../swarm/swarm-source.ts";
import type { SwarmSource } from "../swarm/swarm-source.ts";
import type { SwarmLink } from "../swarm/swarm-link.ts";
import type { SwarmStats } from "../../shared/swarm.ts";

export interface WriteImageOptions {
  /** The disk (block device) or, in tests and benches, a regular file standing in for one. */
  target: string;
  signal?: AbortSignal;
  /** Throttled (about once a second) download progress, plus a final report. */
  onProgress?: (progress: ImageProgress) => void;
  logger?: Logger;
  /** HTTP timeouts and retry budgets (defaults suit real deployments). */
  fetch?: Omit<FetchOptions, "signal" | "logger">;
  /** Bound on qcow2 data held while waiting for its L2 table (the request's limits win). Default 64 MiB. */
  qcow2MaxBufferedBytes?: number;
  progressIntervalMs?: number;
  /** The line to the conductor's swarm tracker: with the request's `swarm`, chunks are shared with peers. */
  swarm?: SwarmLink;
  /** A download at least this long is hashed on a worker thread when there is a second CPU. Default 1 GiB. */
  parallelHashBytes?: number;
}

/** What streamImage reads: the store's download, or a swarm's chunks. */
interface ImageSource extends AsyncIterable<Buffer> {
  readonly total: number | null;
  readonly received: number;
  close(): void;
}

/**
 * Streams an image from its URL onto the target: download (resuming on drops) → checksum → decompress
 * (gzip/zstd/xz) → raw or qcow2 → sparse writer. Partition images get a fresh GPT and go into its root
 * partition; a config drive goes into its own partition (added at the disk's end for whole-disk images).
 * Resolves only when every byte is written, fsynced and the checksum matched.
 * @throws ImageError (HttpStatusError, ChecksumMismatchError, …) with `retryable`; PartitionError;
 * ZodError for a malformed request; the signal's reason when aborted.
 */
export async function writeImage(
  request: WriteImageRequest,
  options: WriteImageOptions,
): Promise<WriteImageResult> {
  const started = Date.now();
  const {
    image,
    configdrive,
    limits = {},
    swarm: swarmRequest,
    checkpoint_bytes: checkpointBytes,
    resume,
  } = WriteImageRequestSchema.parse(request);
  const { signal } = options;
  const log = (options.logger ?? silentLogger).child({
    image: redactQuery(image.url),
    target: options.target,
  });
  const fetchOptions: FetchOptions = {
    ...options.fetch,
    ...transferLimits(limits),
    ...(image.ca === undefined ? {} : { ca: image.ca }),
    signal,
    logger: log,
  };
  // Fetch and decode early: a bad config drive must fail before the disk is touched.
  const iso =
    configdrive === undefined
      ? undefined
      : decodeConfigDrive(await configDriveText(configdrive, fetchOptions));

  const expected = await expectedChecksum(image, fetchOptions);
  const blockMap =
    image.block_map === undefined
      ? undefined
      : parseBlockMap(
          (await fetchSmall(image.block_map, { ...fetchOptions, maxBytes: 64 * 1024 * 1024 })).toString(
            "utf8",
          ),
        );
  // The wave, joined once when the request asks for one (undefined: no swarm to join).
  let joined: Promise<SwarmSource | undefined> | undefined;
  const joinSwarm = (): Promise<SwarmSource | undefined> =>
    (joined ??=
      swarmRequest !== undefined && options.swarm !== undefined
        ? openSwarm({
            url: image.url,
            checksum: expected === undefined ? undefined : `${expected.algo}:${expected.value}`,
            link: options.swarm,
            request: swarmRequest,
            fetch: fetchOptions,
            logger: log,
          })
        : Promise.resolve(undefined));
  // A resumed write without a block map rejoins the wave, joined first so that it restarts at the start of the
  // chunk its checkpoint fell in (chunks are shared whole); a block-mapped one fetches its rest from the store.
  const early = resume !== undefined && blockMap === undefined ? await joinSwarm() : undefined;
  let target: Awaited<ReturnType<typeof inspectTarget>>;
  const partitions: Record<string, PartitionInfo> = {};
  let region: { offset: number; length: number | undefined };
  let readsZeroes: boolean;
  let kept: KeptPrefix | undefined;
  let resumed: WriteImageResult["resumed"];
  try {
    target = await inspectTarget(options.target, signal);
    region = { offset: 0, length: target.kind === "file" && target.size === 0 ? undefined : target.size };
    if (resume !== undefined) {
      const refusal = resumeRefusal(resume, { image, expected });
      const restartAt = chunkStart(restartPoint(resume, blockMap), early?.chunkBytes);
      const outcome =
        refusal === null
          ? await readKeptPrefix(target.path, resume, { offset: 0, signal, restartAt })
          : { refused: refusal };
      if ("refused" in outcome) {
        resumed = { from_bytes: 0, reason: outcome.refused };
        log.warn(
          { checkpoint_bytes: resume.bytes, reason: outcome.refused },
          "cannot resume; writing from the start",
        );
      } else {
        kept = outcome;
        resumed = { from_bytes: outcome.bytes };
        log.info({ kept_bytes: outcome.bytes }, "resuming the write after the disk's verified prefix");
      }
    }
    if (kept !== undefined) {
      // NOTE: the disk is neither zeroed nor wiped (that would lose the kept prefix), so it may hold anything
      // past it: every byte of the rest is written, zeros included.
      readsZeroes = false;
    } else if (image.image_type === "partition" && image.partition) {
      const fileZeroed =
        target.kind === "file"
          ? await zeroCheaply(target, { offset: 0, length: target.size }, signal)
          : false;
      Object.assign(partitions, await createPartitionLayout(target, image.partition, signal));
      const root = partitions.root as PartitionInfo;
      region = { offset: root.start_bytes, length: root.size_bytes };
      readsZeroes =
        fileZeroed ||
        (await zeroCheaply(target, { offset: root.start_bytes, length: root.size_bytes }, signal));
    } else {
      readsZeroes = await zeroCheaply(target, { offset: 0, length: target.size }, signal);
      // Like IPA: no stale partition table (a GPT backup at the disk's end) or RAID/filesystem signature
      // may survive beside a whole-disk image that does not reach that far.
      if (!readsZeroes && target.kind === "block")
        await eraseDeviceMetadata(target.path, { signal, logger: log });
    }
  } catch (error) {
    await early?.abandon();
    throw error;
  }
  log.info({ readsZeroes, region }, "writing image");

  const session = new DownloadSession();
  const stream: StreamOptions = {
    ...options,
    limits,
    fetchOptions,
    session,
    algo: expected?.algo ?? "sha256",
    writer: {
      path: target.path,
      offset: region.offset,
      limit: region.length,
      readsZeroes,
      ...(kept === undefined ? {} : { keep: kept.bytes }),
    },
    ...(kept === undefined ? {} : { kept }),
    // a checkpoint is worth keeping only where a resume can use it (see resumeRefusal)
    ...(checkpointBytes !== undefined && expected !== undefined && image.image_type !== "partition"
      ? { checkpointBytes }
      : {}),
  };
  let written: Awaited<ReturnType<typeof streamImage>>;
  let swarm: SwarmSource | undefined;
  let swarmStats: SwarmStats | undefined;
  try {
    const mapped =
      blockMap !== undefined &&
      (await mapFitsObject(image.url, blockMap, { fetch: fetchOptions, session, logger: log }));
    if (mapped) log.info({ mapped_bytes: blockMap.mappedBytes }, "downloading the block map's ranges only");
    // A block-mapped write shares the chunks that hold its ranges (chunks are store bytes either way). A
    // resumed one without a block map takes its rest from the wave it joined above, from the kept prefix's end
    // (a chunk's start); a block-mapped resumed one takes its rest from the store.
    swarm = kept === undefined ? await joinSwarm() : early;
    if (kept !== undefined) swarm?.startAt(kept.bytes);
    written = mapped
      ? await streamMapped(image, blockMap, { ...stream, hashHoles: expected !== undefined, swarm })
      : await streamImage(image, stream, swarm);
    if (expected) written.tap?.verify(expected);
    swarmStats = swarm?.finish();
  } catch (error) {
    if (swarm) {
      swarmStats = swarm.stats;
      log.warn({ swarm: swarmStats }, "swarm write failed");
      await swarm.abandon();
      if (error instanceof ChecksumMismatchError) {
        // Every peer chunk matched its anchor: the bytes an assignee reported from the store were wrong.
        throw new ImageError(
          `${error.message} (written in swarm wave ${swarmStats.wave}: ${swarmStats.bytes_from_peers} bytes came from peers, checked against hashes other agents reported from the store)`,
          error.code,
          error.retryable,
        );
      }
    }
    throw error;
  } finally {
    session.close();
  }
  const checksum = expected ? written.tap?.verify(expected) : written.tap?.digest();
  if (expected) {
    log.info({ algo: expected.algo }, "image checksum verified");
  }

  if (iso) {
    target = await inspectTarget(options.target, signal);
    const partition =
      partitions.configdrive ??
      (image.image_type === "whole-disk" ? await appendConfigDrivePartition(target, signal) : undefined);
    if (!partition) throw new ImageError("the partition layout has no config drive partition", "configdrive");
    partitions.configdrive = partition;
    await writeConfigDrive(target.path, partition, iso);
    log.info({ partition: partition.number, bytes: iso.length }, "config drive written");
  }
  await rereadPartitions(target, signal).catch(() => undefined);

  return {
    bytes_written: written.bytesWritten,
    image_bytes: written.imageBytes,
    ...(checksum ? { checksum } : {}),
    duration_ms: Date.now() - started,
    ...(Object.keys(partitions).length > 0 ? { partitions } : {}),
    ...(swarmStats === undefined ? {} : { swarm: swarmStats }),
    ...(resumed === undefined ? {} : { resumed }),
  };
}

/** Ironic sends the config drive inline, or (when large) as a URL of the same base64 text. */
/** The request's download speed bounds, as fetch options (absent ones keep fetch's defaults). */
function transferLimits(limits: ImageLimits): Partial<FetchOptions> {
  return {
    ...(limits.min_bytes_per_second === undefined ? {} : { minBytesPerSecond: limits.min_bytes_per_second }),
    ...(limits.rate_window_s === undefined ? {} : { rateWindowMs: limits.rate_window_s * 1000 }),
    ...(limits.deadline_s === undefined ? {} : { deadlineMs: limits.deadline_s * 1000 }),
  };
}

async function configDriveText(configdrive: string, fetchOptions: FetchOptions): Promise<string> {
  if (!/^https?:\/\//.test(configdrive)) return configdrive;
  // 64 MiB of ISO, gzipped and base64-encoded, is at most about 86 MiB.
  return (await fetchSmall(configdrive, { ...fetchOptions, maxBytes: 96 * 1024 * 1024 })).toString("latin1");
}

async function expectedChecksum(
  image: ImageSpec,
  fetchOptions: FetchOptions,
): Promise<ChecksumValue | undefined> {
  const spec = image.checksum;
  if (spec === undefined) return undefined;
  if ("url" in spec) return parseChecksumFile(await fetchText(spec.url, fetchOptions), image.url);
  return spec;
}

interface StreamOptions extends WriteImageOptions {
  limits: ImageLimits;
  fetchOptions: FetchOptions;
  session: DownloadSession;
  algo: ChecksumValue["algo"];
  writer: { path: string; offset: number; limit: number | undefined; readsZeroes: boolean; keep?: number };
  /** A resumed write: the prefix kept on the disk, its bytes already hashed. */
  kept?: KeptPrefix;
  /** Durable checkpoints every this many bytes of a raw, uncompressed stream. */
  checkpointBytes?: number;
}

interface Streamed {
  tap: HashingTap | undefined;
  bytesWritten: number;
  imageBytes: number;
}

/**
 * Only a raw image's mapped ranges: holes are neither downloaded nor written (the writer zero-fills them when
 * the target does not read zeros). With `hashHoles`, the whole-image checksum counts the holes' zeros.
 */
async function streamMapped(
  image: ImageSpec,
  map: BlockMap,
  options: Omit<StreamOptions, "swarm"> & { hashHoles: boolean; swarm: SwarmSource | undefined },
): Promise<Streamed> {
  if (image.size !== undefined && image.size !== map.imageSize) {
    throw new ImageError(
      `image size ${image.size} differs from the block map's ${map.imageSize}`,
      "image_format",
    );
  }
  const { kept } = options;
  const tap = kept?.tap ?? (options.hashHoles ? new HashingTap(options.algo) : undefined);
  const meter = new ProgressMeter(options.onProgress, options.progressIntervalMs);
  meter.total = map.mappedBytes;
  let received = 0;
  const every = tap === undefined ? undefined : options.checkpointBytes;
  let nextCheckpoint = (kept?.bytes ?? 0) + (every ?? 0);
  const writer = await ImageWriter.open(options.writer);
  try {
    const from = {
      fetch: options.fetchOptions,
      session: options.session,
      onHole: (bytes: number) => tap?.zeros(bytes),
      ...(kept === undefined ? {} : { from: kept.bytes }),
    };
    const extents = options.swarm
      ? swarmMappedExtents(image.url, map, { ...from, swarm: options.swarm })
      : mappedExtents(image.url, map, from);
    for await (const extent of extents) {
      tap?.update(extent.data);
      received += extent.data.length;
      meter.update(received);
      await writer.write(extent);
      const end = extent.offset + extent.data.length;
      // the holes before the extent are hashed already: the hash stands at `end`, the disk's first bytes
      if (tap !== undefined && every !== undefined && end >= nextCheckpoint && tap.bytes === end) {
        nextCheckpoint = end + every;
        const checkpoint = { bytes: end, algo: tap.algo, digest: await tap.prefixDigest() };
        const { durable } = await writer.checkpoint();
        durable.then(
          () => meter.checkpoint(checkpoint),
          () => undefined,
        );
      }
    }
    await writer.finish(map.imageSize);
    meter.finish();
    return { tap, bytesWritten: writer.bytesWritten, imageBytes: map.imageSize };
  } catch (error) {
    await writer.abort();
    throw error;
  }
}

/**
 * Peeks at the stream's magic: compression (gzip, zstd, xz, or none), then the format (qcow2 or raw), and
 * returns the image's extents. @throws ImageError "image_format" for a qcow2 without its header
 */
async function detectedExtents(
  hashed: AsyncIterable<Buffer>,
  image: ImageSpec,
  options: StreamOptions,
): Promise<{ compression: string; qcow2: Qcow2Converter | undefined; extents: AsyncIterable<Extent> }> {
  const compressedPeek = await peek(hashed, COMPRESSION_MAGIC_BYTES);
  const compression = image.compression ?? detectCompression(compressedPeek.head);
  // Download chunks are views of reused buffers: decompressors keep them past the next read, raw and qcow2 do
  // not (the converter copies what it holds).
  const plain =
    compression === "none"
      ? compressedPeek.stream
      : decompress(ownedChunks(compressedPeek.stream), compression, maxDecompressed(options));
  const formatPeek = await peek(plain, 4);
  const format: DiskFormat = image.disk_format ?? (isQcow2(formatPeek.head) ? "qcow2" : "raw");
  if (format === "qcow2" && !isQcow2(formatPeek.head)) {
    throw new ImageError("disk_format is qcow2 but the image has no qcow2 header", "image_format");
  }
  const qcow2 = format === "qcow2" ? new Qcow2Converter(qcow2Limits(options)) : undefined;
  const extents: AsyncIterable<Extent> = qcow2
    ? qcow2.extents(formatPeek.stream)
    : rawExtents(formatPeek.stream);
  options.logger?.debug({ compression, format }, "image stream detected");
  return { compression, qcow2, extents };
}

/** The request's limits, else the defaults: a decompressed stream may be twice the target (qcow2 metadata). */
function maxDecompressed(options: StreamOptions): number | undefined {
  const target = options.writer.limit;
  return options.limits.max_decompressed_bytes ?? (target === undefined ? undefined : 2 * target);
}

function qcow2Limits(options: StreamOptions): Qcow2Limits {
  const { limits } = options;
  return {
    maxBufferedBytes: limits.qcow2_max_buffered_bytes ?? options.qcow2MaxBufferedBytes,
    maxTableBytes: limits.qcow2_max_table_bytes,
    metadataFactor: limits.qcow2_metadata_factor,
    // The virtual size must fit the target: known from the header, refused before a byte is written.
    maxVirtualSize: options.writer.limit,
  };
}

/**
 * A download at least this long is hashed on a worker thread (ParallelHash) when there is a second CPU.
 * NOTE: measured through the API: a 2 GiB raw image gained (its hash beside the receive), a 411 MiB qcow2 lost
 * the worker's start (~30 ms of a 0.5 s write); docs/images.md.
 */
const PARALLEL_HASH_BYTES = 1024 * 1024 * 1024;

async function streamImage(
  image: ImageSpec,
  options: StreamOptions,
  source?: ImageSource,
): Promise<Streamed> {
  const { kept } = options;
  const download: ImageSource =
    source ??
    new ImageDownload(image.url, options.fetchOptions, {
      session: options.session,
      ...(kept === undefined ? {} : { from: kept.bytes }),
    });
  const tap = kept?.tap ?? new HashingTap(options.algo);
  // a worker's start (~30 ms) pays only for a large image, and only with a second CPU to run on
  const parallel = (): boolean =>
    (download.total ?? 0) >= (options.parallelHashBytes ?? PARALLEL_HASH_BYTES) && availableParallelism() > 1;
  const meter = new ProgressMeter(options.onProgress, options.progressIntervalMs);
  async function* counted(): AsyncGenerator<Buffer> {
    for await (const chunk of download) {
      meter.total ??= download.total ?? image.size ?? null;
      meter.update(download.received);
      yield chunk;
    }
  }

  let writer: ImageWriter | undefined;
  let rawEnd = kept?.bytes ?? 0;
  try {
    // a resumed write was raw and uncompressed from its start (its checkpoint says so): no magic to look for
    const { compression, qcow2, extents } =
      kept === undefined
        ? await detectedExtents(tap.pass(counted(), parallel), image, options)
        : { compression: "none", qcow2: undefined, extents: rawExtents(tap.pass(counted()), kept.bytes) };
    const every = compression === "none" && !qcow2 ? options.checkpointBytes : undefined;
    let nextCheckpoint = rawEnd + (every ?? 0);

    // The raw path reuses its buffers; the others allocate as they decode (zstd paces itself, inside fzstd).
    const pacer = (compression === "none" && !qcow2) || compression === "zstd" ? undefined : new GcPacer();
    writer = await ImageWriter.open(options.writer);
    const block = writer;
    // A raw image's bytes go from the socket straight into the writer's block (hashed there, never copied).
    if (download instanceof ImageDownload && compression === "none" && !qcow2)
      download.landing = () => block.landing();
    for await (const extent of extents) {
      pacer?.allocated(extent.data.length);
      await writer.write(extent);
      rawEnd = Math.max(rawEnd, extent.offset + extent.data.length);
      // the hash must stand exactly at rawEnd for the prefix digest to be the disk's first rawEnd bytes
      if (every !== undefined && rawEnd >= nextCheckpoint && tap.bytes === rawEnd) {
        nextCheckpoint = rawEnd + every;
        const checkpoint = { bytes: rawEnd, algo: tap.algo, digest: await tap.prefixDigest() };
        const { durable } = await writer.checkpoint();
        durable.then(
          () => meter.checkpoint(checkpoint),
          () => undefined,
        );
      }
    }
    const imageBytes = qcow2 ? qcow2.virtualSize : rawEnd;
    await writer.finish(imageBytes);
    if (download.total !== null && download.received !== download.total) {
      throw new ImageError(
        `download ended at ${download.received} of ${download.total} bytes`,
        "http_connection",
        true,
      );
    }
    if (image.size !== undefined && download.received !== image.size) {
      throw new ImageError(
        `downloaded ${download.received} bytes, expected size ${image.size}`,
        "image_format",
      );
    }
    meter.finish();
    return { tap, bytesWritten: writer.bytesWritten, imageBytes };
  } catch (error) {
    // Generators that never started cannot clean up after themselves: close the connection.
    download.close();
    await writer?.abort();
    throw error;
  }
}

/** `at`, or with chunks of `size` bytes the start of the chunk it falls in. */
function chunkStart(at: number, size: number | undefined): number {
  return size === undefined ? at : at - (at % size);
}
