import { open, readdir, stat } from "node:fs/promises";
import type { Logger } from "../../shared/log.ts";
import { silentLogger } from "../../shared/log.ts";
import { exec } from "../../shared/system/exec.ts";
import { ensureDeviceNode, sysfsBlockDir } from "./device-node.ts";
import { inspectTarget, rereadPartitions } from "./target.ts";

/** Partition tables sit at both ends (GPT's backup at the end); md 0.90/1.0 superblocks at the end, 1.1/1.2 at the start. */
const ZAP_BYTES = 1024 * 1024;

export class EraseError extends Error {
  override name = "EraseError";
}

export interface EraseOptions {
  signal?: AbortSignal;
  logger?: Logger;
}

export interface EraseMetadataResult {
  device: string;
  /** Partitions whose signatures were wiped first. */
  partitions: string[];
  /** Bytes zeroed at each end. */
  zapped_bytes: number;
}

/** Partition device nodes of a disk, from sysfs (none for a file or an unpartitioned disk). */
async function partitionsOf(device: string): Promise<string[]> {
  const { name, dir } = await sysfsBlockDir(device);
  const entries = await readdir(dir).catch(() => [] as string[]);
  const parts: string[] = [];
  for (const entry of entries) {
    if (!entry.startsWith(name)) continue;
    const isPartition = await stat(`${dir}/${entry}/partition`).then(
      () => true,
      () => false,
    );
    if (isPartition) parts.push(await ensureDeviceNode(entry));
  }
  return parts.sort();
}

async function wipefs(path: string, signal?: AbortSignal): Promise<void> {
  const result = await exec("wipefs", ["--all", "--force", path], { signal, timeoutMs: 120_000 });
  if (result.code !== 0) throw new EraseError(`wipefs --all ${path} failed: ${result.stderr.trim()}`);
}

/**
 * erase_devices_metadata for one disk (or a file standing in for one): wipes the signatures wipefs knows
 * (of each partition, then of the disk), then zeroes the first and last MiB so no partition table (GPT
 * primary or backup, MBR), md superblock or filesystem label survives.
 * @throws EraseError when wipefs fails; fs errors from the writes; the signal's reason when aborted.
 */
export async function eraseDeviceMetadata(
  device: string,
  options: EraseOptions = {},
): Promise<EraseMetadataResult> {
  const { signal } = options;
  const log = (options.logger ?? silentLogger).child({ device });
  const target = await inspectTarget(device, signal);
  const partitions = target.kind === "block" ? await partitionsOf(device) : [];
  for (const partition of partitions) await wipefs(partition, signal);
  await wipefs(device, signal);
  signal?.throwIfAborted();

  const zap = Math.min(ZAP_BYTES, target.size);
  const zeros = Buffer.alloc(zap);
  const handle = await open(device, "r+");
  try {
    await handle.write(zeros, 0, zap, 0);
    if (target.size > zap) {
      const tail = Math.min(zap, target.size - zap);
      await handle.write(zeros, 0, tail, target.size - tail);
    }
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rereadPartitions(target, signal).catch(() => undefined);
  log.info({ partitions, zapped_bytes: zap }, "device metadata erased");
  return { device, partitions, zapped_bytes: zap };
}

/** Erases the metadata of every given disk, one after the other. @throws as eraseDeviceMetadata */
export async function eraseDevicesMetadata(
  devices: readonly string[],
  options: EraseOptions = {},
): Promise<EraseMetadataResult[]> {
  const results: EraseMetadataResult[] = [];
  for (const device of devices) results.push(await eraseDeviceMetadata(device, options));
  return results;
}
