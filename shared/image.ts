import { z } from "zod";
import { SwarmRequestSchema, SwarmStatsSchema } from "./swarm.ts";

/**
 * What the conductor sends the agent to write an image, and what the agent reports back.
 *
 * Mapping from Ironic's node.instance_info (the conductor builds an ImageSpec from it):
 * - `image_source` (after turning a Glance/Swift/S3 reference into a temporary HTTP(S) URL) -> `url`
 * - `image_disk_format` ("raw" | "qcow2") -> `disk_format`; absent means "detect by magic"
 * - `image_os_hash_algo` + `image_os_hash_value` -> `checksum: {algo, value}`
 * - `image_checksum` (legacy MD5, or a URL of a checksum file) -> `checksum: {algo: "md5", value}` or `{url}`
 * - `image_size` -> `size` (bytes of the download, as Glance reports it)
 * - `image_bmap` (an Anvil extension: a bmaptool block map, signed like image_source) -> `block_map`
 * - `image_type` ("whole-disk" | "partition") -> `image_type`
 * - `root_mb` / `swap_mb` / `ephemeral_mb` -> `partition.root_mb` / `swap_mb` / `ephemeral_mb`
 * - `configdrive` (base64 of a gzipped ISO) -> `configdrive` on the write request
 */

export const CHECKSUM_ALGOS = ["md5", "sha256", "sha512"] as const;
export const ChecksumAlgoSchema = z.enum(CHECKSUM_ALGOS);
export type ChecksumAlgo = z.infer<typeof ChecksumAlgoSchema>;

/** Hex digest lengths by algorithm; also how a bare hex value in a checksum file reveals its algorithm. */
export const CHECKSUM_HEX_LENGTH: Record<ChecksumAlgo, number> = { md5: 32, sha256: 64, sha512: 128 };

export const ChecksumValueSchema = z.object({
  algo: ChecksumAlgoSchema,
  value: z
    .string()
    .regex(/^[0-9a-fA-F]+$/, "hex digest")
    .transform((v) => v.toLowerCase()),
});
export type ChecksumValue = z.infer<typeof ChecksumValueSchema>;

/** A checksum given inline, or the URL of a sha256sum-style checksum file. */
export const ChecksumSpecSchema = z.union([
  ChecksumValueSchema.refine((c) => c.value.length === CHECKSUM_HEX_LENGTH[c.algo], {
    message: "digest length does not match the algorithm",
  }),
  z.object({ url: z.url({ protocol: /^https?$/ }) }),
]);
export type ChecksumSpec = z.infer<typeof ChecksumSpecSchema>;

export const DISK_FORMATS = ["raw", "qcow2"] as const;
export const DiskFormatSchema = z.enum(DISK_FORMATS);
export type DiskFormat = z.infer<typeof DiskFormatSchema>;

export const COMPRESSIONS = ["none", "gzip", "zstd", "xz"] as const;
export const CompressionSchema = z.enum(COMPRESSIONS);
export type Compression = z.infer<typeof CompressionSchema>;

export const IMAGE_TYPES = ["whole-disk", "partition"] as const;
export const ImageTypeSchema = z.enum(IMAGE_TYPES);
export type ImageType = z.infer<typeof ImageTypeSchema>;

export const PartitionLayoutSchema = z.object({
  root_mb: z.number().int().positive(),
  swap_mb: z.number().int().nonnegative().optional(),
  ephemeral_mb: z.number().int().nonnegative().optional(),
  /** Reserve a config drive partition (filled from the request's configdrive). */
  configdrive: z.literal(true).optional(),
});
export type PartitionLayout = z.infer<typeof PartitionLayoutSchema>;

/**
 * What names an image object across the temporary URLs it is fetched by: the URL without its query (a
 * signature that differs per node and per deploy), fragment or credentials (a secret, never kept or sent on).
 * @throws TypeError for a string that is not a URL
 */
export function imageObjectUrl(url: string): string {
  const parsed = new URL(url);
  parsed.search = "";
  parsed.hash = "";
  parsed.username = "";
  parsed.password = "";
  return parsed.href;
}

export const ImageSpecSchema = z
  .object({
    url: z.url({ protocol: /^https?$/ }),
    /** Absent: detected from the (decompressed) stream's magic. */
    disk_format: DiskFormatSchema.optional(),
    /** Absent: detected from the downloaded stream's magic (gzip 1f8b, zstd 28b52ffd, xz fd377a585a00). */
    compression: CompressionSchema.optional(),
    /** Over the downloaded bytes, i.e. the compressed file as stored. */
    checksum: ChecksumSpecSchema.optional(),
    /** Bytes of the download, when known ahead (a cross-check of Content-Length). */
    size: z.number().int().nonnegative().optional(),
    /**
     * URL of a bmaptool block map (`bmaptool create`, Yocto's `.bmap`) of a raw image: only its mapped ranges
     * are downloaded (Range requests, each range's digest checked) and written. Ignored, with a warning, when
     * the object turns out compressed, qcow2, of another size, or served without Range support.
     */
    block_map: z.url({ protocol: /^https?$/ }).optional(),
    image_type: ImageTypeSchema,
    partition: PartitionLayoutSchema.optional(),
    /** PEM CA certificate(s) trusted, instead of the system's, for https:// image, checksum and block map URLs. */
    ca: z
      .string()
      .min(1)
      .max(256 * 1024)
      .optional(),
  })
  .refine((s) => s.image_type !== "partition" || s.partition !== undefined, {
    message: "a partition image needs a partition layout",
    path: ["partition"],
  });
export type ImageSpec = z.infer<typeof ImageSpecSchema>;

/**
 * Bounds on what a hostile image may make the agent do. Every field has a safe default; the conductor sends
 * none today, so these are for operators who must widen (or tighten) them per deploy.
 */
export const ImageLimitsSchema = z.object({
  /** Bytes one gzip/zstd/xz stream may decompress to. Default: twice the target's size (no bound for a file). */
  max_decompressed_bytes: z.number().int().positive().optional(),
  /** qcow2 data held while it waits for the tables that map it (or compressed data for its end). Default 64 MiB. */
  qcow2_max_buffered_bytes: z.number().int().positive().optional(),
  /** qcow2 table state: the L1 copy and mappings announced ahead of their clusters. Default 128 MiB. */
  qcow2_max_table_bytes: z.number().int().positive().optional(),
  /** How many times more L1/refcount table than the virtual size needs is accepted. Default 4. */
  qcow2_metadata_factor: z.number().min(1).max(64).optional(),
  /** Bytes per second the image server must average over each rate window of waiting for it. Default 65536. */
  min_bytes_per_second: z.number().int().positive().optional(),
  /** Seconds the minimum rate is averaged over. Default 60. */
  rate_window_s: z.number().positive().max(3600).optional(),
  /** Deadline of each download, in seconds. Default: its size at the minimum rate plus 300 s. */
  deadline_s: z.number().positive().optional(),
});
export type ImageLimits = z.infer<typeof ImageLimitsSchema>;

/**
 * A durable prefix of a raw image on the target: its first `bytes` bytes were written and fsynced, and
 * `digest` is the image checksum's algorithm over exactly those bytes (a resumed write re-reads them from the
 * disk, checks the digest and continues the whole-image checksum from there).
 */
export const CheckpointSchema = z.object({
  bytes: z.number().int().positive(),
  algo: ChecksumAlgoSchema,
  digest: z.string().regex(/^[0-9a-f]{32,128}$/),
});
export type Checkpoint = z.infer<typeof CheckpointSchema>;

export const WriteImageRequestSchema = z.object({
  image: ImageSpecSchema,
  limits: ImageLimitsSchema.optional(),
  /**
   * Base64 of a gzipped (or plain) ISO 9660 config drive labelled config-2, as Ironic sends it, or an
   * HTTP(S) URL serving that base64 text (Ironic's way for large config drives).
   */
  configdrive: z.string().min(1).optional(),
  /**
   * Swarm deploy (the conductor's deploy.swarm): share the image's chunks with the other agents writing it,
   * the conductor tracking who holds what. Absent: the store alone, as ever.
   */
  swarm: SwarmRequestSchema.optional(),
  /**
   * Report a durable checkpoint (progress `checkpoint`) each time this many more bytes of a raw, uncompressed
   * whole-disk image are written and fsynced. Absent: none (an old conductor).
   */
  checkpoint_bytes: z.number().int().positive().optional(),
  /** Continue a write a reboot cut short, from a checkpoint an earlier run of this request reported. */
  resume: CheckpointSchema.optional(),
});
export type WriteImageRequest = z.infer<typeof WriteImageRequestSchema>;

export const ImageProgressSchema = z.object({
  /** Bytes downloaded so far (the compressed stream, what bytes_total counts). */
  bytes_done: z.number().int().nonnegative(),
  bytes_total: z.number().int().nonnegative().nullable(),
  /** Average download rate since the start, bytes per second. */
  rate_bps: z.number().nonnegative(),
  /** Set on the report that follows a durable checkpoint (see WriteImageRequest.checkpoint_bytes). */
  checkpoint: CheckpointSchema.optional(),
});
export type ImageProgress = z.infer<typeof ImageProgressSchema>;

export const PartitionInfoSchema = z.object({
  number: z.number().int().positive(),
  start_bytes: z.number().int().nonnegative(),
  size_bytes: z.number().int().nonnegative(),
  /** The GPT partition's unique GUID (lower case). */
  uuid: z.string(),
});
export type PartitionInfo = z.infer<typeof PartitionInfoSchema>;

export const WriteImageResultSchema = z.object({
  /** Bytes actually written to the target (all-zero blocks skipped on a zeroed target are not counted). */
  bytes_written: z.number().int().nonnegative(),
  /** Size of the image as the disk sees it (after decompression and qcow2 conversion). */
  image_bytes: z.number().int().nonnegative(),
  /**
   * The digest of the downloaded bytes (verified when the request carried a checksum). Absent when a block
   * map skipped the holes and no checksum was asked for (hashing the holes' zeros would cost the time saved).
   */
  checksum: ChecksumValueSchema.optional(),
  duration_ms: z.number().nonnegative(),
  /** Partitions created: for partition images (root, swap, ephemeral, configdrive) or a whole-disk config drive. */
  partitions: z.record(z.string(), PartitionInfoSchema).optional(),
  /** Where the bytes came from, when the image was written in a swarm. */
  swarm: SwarmStatsSchema.optional(),
  /**
   * A resumed write: the bytes kept from the disk (0 when the checkpoint could not be used) and, if so, why
   * it started over.
   */
  resumed: z.object({ from_bytes: z.number().int().nonnegative(), reason: z.string().optional() }).optional(),
});
export type WriteImageResult = z.infer<typeof WriteImageResultSchema>;
