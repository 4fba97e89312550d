import { open } from "node:fs/promises";
import { gunzipSync } from "node:zlib";
import type { PartitionInfo } from "../../shared/image.ts";
import { ImageError } from "./errors.ts";

const ISO_MAGIC_OFFSET = 32769; // "CD001" in the primary volume descriptor (sector 16, byte 1)

/**
 * Decodes a config drive as Ironic sends it: base64 of a gzipped ISO (a plain ISO is accepted too).
 * @throws ImageError "configdrive" when it is not base64 of an ISO 9660 image
 */
export function decodeConfigDrive(encoded: string): Buffer {
  const raw = Buffer.from(encoded, "base64");
  let iso: Buffer;
  try {
    iso = raw[0] === 0x1f && raw[1] === 0x8b ? gunzipSync(raw) : raw;
  } catch (error) {
    throw new ImageError(`config drive is not valid gzip: ${(error as Error).message}`, "configdrive");
  }
  if (iso.subarray(ISO_MAGIC_OFFSET, ISO_MAGIC_OFFSET + 5).toString("latin1") !== "CD001") {
    throw new ImageError("config drive is not an ISO 9660 image", "configdrive");
  }
  return iso;
}

/**
 * Writes the ISO at the partition's start through the disk itself (no partition device node needed) and
 * zeroes the rest of the partition's first MiB so no stale signature survives behind a small ISO.
 * @throws ImageError "configdrive" when the ISO is larger than the partition
 */
export async function writeConfigDrive(device: string, partition: PartitionInfo, iso: Buffer): Promise<void> {
  if (iso.length > partition.size_bytes) {
    throw new ImageError(
      `config drive (${iso.length} bytes) does not fit its partition (${partition.size_bytes} bytes)`,
      "configdrive",
    );
  }
  const handle = await open(device, "r+");
  try {
    await handle.write(iso, 0, iso.length, partition.start_bytes);
    const tail = Math.min(1024 * 1024, partition.size_bytes) - iso.length;
    if (tail > 0) await handle.write(Buffer.alloc(tail), 0, tail, partition.start_bytes + iso.length);
    await handle.sync();
  } finally {
    await handle.close();
  }
}
