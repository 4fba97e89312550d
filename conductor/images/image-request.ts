import { z } from "zod";
import type { WriteImageRequest } from "../../shared/image.ts";
import { CHECKSUM_ALGOS, ImageSpecSchema } from "../../shared/image.ts";
import { RootDeviceHintsSchema } from "../../shared/root-device.ts";
import { Invalid } from "../errors.ts";

/** Turns a non-HTTP image reference (swift://, s3://, file://) into a temporary HTTP(S) URL. */
export type UrlSigner = (source: URL) => string;

const InstanceInfo = z
  .object({
    image_source: z.string().min(1),
    image_disk_format: z.enum(["raw", "qcow2"]).optional(),
    image_os_hash_algo: z.enum(CHECKSUM_ALGOS).optional(),
    image_os_hash_value: z.string().optional(),
    image_checksum: z.string().optional(),
    image_size: z.coerce.number().int().nonnegative().optional(),
    image_type: z.enum(["whole-disk", "partition"]).optional(),
    root_gb: z.coerce.number().int().positive().optional(),
    root_mb: z.coerce.number().int().positive().optional(),
    swap_mb: z.coerce.number().int().nonnegative().optional(),
    ephemeral_mb: z.coerce.number().int().nonnegative().optional(),
    ephemeral_gb: z.coerce.number().int().nonnegative().optional(),
    configdrive: z.string().optional(),
    /** Anvil's extension: a bmaptool block map of a raw image_source (same URL schemes). */
    image_bmap: z.string().min(1).optional(),
    /** Anvil's extension: PEM CA certificate(s) the agent trusts for https:// image URLs (else tls.imageCa). */
    image_ca_cert: z.string().min(1).optional(),
  })
  .loose();

function checksumOf(info: z.infer<typeof InstanceInfo>): WriteImageRequest["image"]["checksum"] {
  if (info.image_os_hash_algo && info.image_os_hash_value) {
    return { algo: info.image_os_hash_algo, value: info.image_os_hash_value };
  }
  if (!info.image_checksum) return undefined;
  if (/^https?:\/\//.test(info.image_checksum)) return { url: info.image_checksum };
  return { algo: "md5", value: info.image_checksum };
}

/** http(s) URLs pass through; swift://, s3:// and file:// become temporary HTTP(S) URLs. */
function temporaryUrl(field: string, value: string, sign: UrlSigner): string {
  let source: URL;
  try {
    source = new URL(value);
  } catch {
    throw new Invalid(`Cannot deploy: instance_info.${field} "${value}" is not a URL`);
  }
  return source.protocol === "http:" || source.protocol === "https:" ? source.toString() : sign(source);
}

/**
 * Builds the agent's write_image request from a node's instance_info (Ironic's field names). Pure.
 * @throws Invalid naming what is missing or malformed
 */
export function writeRequestFromInstanceInfo(
  instanceInfo: Record<string, unknown>,
  options: { sign: UrlSigner; rootDevice?: unknown; imageCa?: string },
): WriteImageRequest & { root_device?: z.infer<typeof RootDeviceHintsSchema> | null } {
  const parsed = InstanceInfo.safeParse(instanceInfo);
  if (!parsed.success) {
    const missing = parsed.error.issues.map((i) => i.path.join(".") || i.message).join(", ");
    throw new Invalid(`Cannot deploy: instance_info is missing or has invalid values for: ${missing}`);
  }
  const info = parsed.data;
  const url = temporaryUrl("image_source", info.image_source, options.sign);
  const blockMap =
    info.image_bmap === undefined ? undefined : temporaryUrl("image_bmap", info.image_bmap, options.sign);
  const imageType = info.image_type ?? "whole-disk";
  const rootMb = info.root_mb ?? (info.root_gb === undefined ? undefined : info.root_gb * 1024);
  const ephemeralMb =
    info.ephemeral_mb ?? (info.ephemeral_gb === undefined ? undefined : info.ephemeral_gb * 1024);
  const image = ImageSpecSchema.safeParse({
    url,
    disk_format: info.image_disk_format,
    checksum: checksumOf(info),
    size: info.image_size,
    block_map: blockMap,
    image_type: imageType,
    ca: info.image_ca_cert ?? options.imageCa,
    partition:
      imageType === "partition"
        ? {
            root_mb: rootMb,
            swap_mb: info.swap_mb,
            ephemeral_mb: ephemeralMb,
            configdrive: info.configdrive ? true : undefined,
          }
        : undefined,
  });
  if (!image.success) {
    throw new Invalid(
      `Cannot deploy: ${image.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`,
    );
  }
  const hints = RootDeviceHintsSchema.nullable().optional().safeParse(options.rootDevice);
  if (!hints.success)
    throw new Invalid("Cannot deploy: properties.root_device is not valid root device hints");
  return {
    image: image.data,
    ...(info.configdrive ? { configdrive: info.configdrive } : {}),
    ...(hints.data ? { root_device: hints.data } : {}),
  };
}
