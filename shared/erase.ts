import { z } from "zod";
import { RootDeviceHintsSchema } from "./root-device.ts";

/**
 * Disk erasing as the agent does it, and the options Ironic's `[deploy]` section carries to IPA (through
 * driver_internal_info there; through the command's arguments here).
 */

/** How a disk was (or would be) erased, best first within each family. */
export const ERASE_METHODS = [
  "nvme_sanitize_crypto",
  "nvme_format_crypto",
  "nvme_sanitize_block",
  "nvme_format_user_data",
  "nvme_sanitize_overwrite",
  "ata_secure_erase_enhanced",
  "ata_secure_erase",
  "discard",
  "write_zeroes",
  "overwrite",
  "metadata",
] as const;
export type EraseMethod = (typeof ERASE_METHODS)[number];
export const EraseMethodSchema = z.enum(ERASE_METHODS);

/** Methods done by the drive's firmware (Ironic's "secure erase"). */
export const FIRMWARE_METHODS: ReadonlySet<EraseMethod> = new Set([
  "nvme_sanitize_crypto",
  "nvme_format_crypto",
  "nvme_sanitize_block",
  "nvme_format_user_data",
  "nvme_sanitize_overwrite",
  "ata_secure_erase_enhanced",
  "ata_secure_erase",
]);

/**
 * One entry of a node's `properties.skip_block_devices`: root-device-style hints naming disks the erase
 * must leave alone, or a RAID volume by name (left to the RAID steps; ignored by the erase).
 */
export const SkipBlockDeviceSchema = z.union([
  z.object({ volume_name: z.string().min(1).max(255) }).strict(),
  RootDeviceHintsSchema,
]);
export type SkipBlockDevice = z.infer<typeof SkipBlockDeviceSchema>;

/** erase_devices_metadata takes the disk choice only. */
export const EraseMetadataOptionsSchema = z
  .object({
    /** Only these disks (paths); default: every disk of the machine. */
    devices: z.array(z.string().min(1).max(4096)).max(256).optional(),
    skip_block_devices: z.array(SkipBlockDeviceSchema).max(256).optional(),
  })
  .strict();
export type EraseMetadataOptions = z.infer<typeof EraseMetadataOptionsSchema>;

/** erase_devices: the disk choice plus Ironic's erase options, defaulting as Ironic's `[deploy]` options. */
export const EraseOptionsSchema = EraseMetadataOptionsSchema.extend({
  /** [deploy] enable_nvme_secure_erase: NVMe format / sanitize. */
  enable_nvme_secure_erase: z.boolean().default(true),
  /** [deploy] enable_ata_secure_erase: hdparm security erase. */
  enable_ata_secure_erase: z.boolean().default(true),
  /** Anvil: a discard (or WRITE ZEROES) the device promises reads back as zeros counts as an erase. */
  enable_discard: z.boolean().default(true),
  /** [deploy] continue_if_disk_secure_erase_fails: fall back to overwriting when firmware erase fails. */
  continue_if_disk_secure_erase_fails: z.boolean().default(false),
  /** [deploy] erase_skip_read_only: skip read-only disks instead of failing (a full erase only). */
  erase_skip_read_only: z.boolean().default(false),
  /** [deploy] shred_random_overwrite_iterations. */
  shred_random_overwrite_iterations: z.number().int().min(0).max(16).default(1),
  /** [deploy] shred_final_overwrite_with_zeros. */
  shred_final_overwrite_with_zeros: z.boolean().default(true),
  /** [deploy] disk_erasure_concurrency: disks erased at once. */
  disk_erasure_concurrency: z.number().int().min(1).max(64).default(4),
  /** erase_devices_express: firmware or zeroing-discard only, the metadata erase for everything else. */
  express: z.boolean().default(false),
  /** Anvil, for tuning and the erase benchmarks: the overwrite's write size in MiB (default: the agent's). */
  overwrite_block_mib: z.number().int().min(1).max(64).optional(),
  /** Anvil: the overwrite's writes in flight per disk (default: the agent's). */
  overwrite_depth: z.number().int().min(1).max(16).optional(),
}).strict();
export type EraseOptions = z.infer<typeof EraseOptionsSchema>;

/** One disk's line in the step's output. */
export const EraseDiskResultSchema = z.object({
  device: z.string(),
  /** The method that erased the disk; null when skipped. */
  method: EraseMethodSchema.nullable(),
  /** A read-back of sampled blocks found the expected content (or, after firmware erase, no old data). */
  verified: z.boolean(),
  /** Bytes the method covered (the disk's size, or the two ends for the metadata erase). */
  bytes: z.number().int().nonnegative(),
  seconds: z.number().nonnegative(),
  /** Why the disk was left alone; null when it was erased. */
  skipped: z.string().nullable(),
  /** Methods that failed before the one that worked, with their errors. */
  fell_back: z.array(z.object({ method: EraseMethodSchema, error: z.string() })).optional(),
});
export type EraseDiskResult = z.infer<typeof EraseDiskResultSchema>;

/** The conductor's erase settings (Ironic's `[deploy]` options), in ConductorConfig's `erase` section. */
export const EraseConfigSchema = z.object({
  enableNvmeSecureErase: z.boolean().default(true),
  enableAtaSecureErase: z.boolean().default(true),
  enableDiscard: z.boolean().default(true),
  continueIfDiskSecureEraseFails: z.boolean().default(false),
  eraseSkipReadOnly: z.boolean().default(false),
  shredRandomOverwriteIterations: z.number().int().min(0).max(16).default(1),
  shredFinalOverwriteWithZeros: z.boolean().default(true),
  diskErasureConcurrency: z.number().int().min(1).max(64).default(4),
});
export type EraseConfig = z.infer<typeof EraseConfigSchema>;

/**
 * The erase_devices arguments for a node: the conductor's settings plus the node's
 * `properties.skip_block_devices` (IPA reads the same two places).
 * @throws Error naming the property when skip_block_devices is not a list of hints
 */
export function eraseDevicesArgs(
  config: EraseConfig,
  node: { properties: Record<string, unknown> },
  options: { express?: boolean } = {},
): z.input<typeof EraseOptionsSchema> {
  return {
    ...skipArgs(node),
    enable_nvme_secure_erase: config.enableNvmeSecureErase,
    enable_ata_secure_erase: config.enableAtaSecureErase,
    enable_discard: config.enableDiscard,
    continue_if_disk_secure_erase_fails: config.continueIfDiskSecureEraseFails,
    erase_skip_read_only: config.eraseSkipReadOnly,
    shred_random_overwrite_iterations: config.shredRandomOverwriteIterations,
    shred_final_overwrite_with_zeros: config.shredFinalOverwriteWithZeros,
    disk_erasure_concurrency: config.diskErasureConcurrency,
    express: options.express ?? false,
  };
}

/** The erase_devices_metadata arguments for a node. @throws as eraseDevicesArgs */
export function eraseMetadataArgs(node: { properties: Record<string, unknown> }): EraseMetadataOptions {
  return skipArgs(node);
}

function skipArgs(node: { properties: Record<string, unknown> }): { skip_block_devices?: SkipBlockDevice[] } {
  const value = node.properties.skip_block_devices;
  if (value === undefined || value === null) return {};
  const parsed = z.array(SkipBlockDeviceSchema).max(256).safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(
      `properties.skip_block_devices is not a list of device hints: ${issue?.path.join(".") ?? ""} ${issue?.message ?? ""}`.trim(),
    );
  }
  return { skip_block_devices: parsed.data };
}
