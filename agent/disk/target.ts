import { realpath, readFile, stat, open } from "node:fs/promises";
import { exec } from "../../shared/system/exec.ts";

/** What the agent writes to: a regular file (tests, benches) or a block device (a disk or a partition). */
export interface TargetInfo {
  path: string;
  kind: "file" | "block";
  /** Bytes (for a file: its current length). */
  size: number;
  /** Logical sector size: 512 for files. */
  sectorSize: number;
}

/** @throws Error when the path is neither a regular file nor a block device, or blockdev fails */
export async function inspectTarget(path: string, signal?: AbortSignal): Promise<TargetInfo> {
  const info = await stat(path);
  if (info.isFile()) return { path, kind: "file", size: info.size, sectorSize: 512 };
  if (!info.isBlockDevice()) throw new Error(`${path} is neither a file nor a block device`);
  const size = await blockdev(["--getsize64", path], signal);
  const sectorSize = await blockdev(["--getss", path], signal);
  return { path, kind: "block", size, sectorSize };
}

async function blockdev(args: string[], signal?: AbortSignal): Promise<number> {
  const result = await exec("blockdev", args, { signal, timeoutMs: 30_000 });
  const value = Number(result.stdout.trim());
  if (result.code !== 0 || !Number.isFinite(value)) {
    throw new Error(`blockdev ${args.join(" ")} failed: ${result.stderr.trim()}`);
  }
  return value;
}

/** The sysfs queue directory of a block device (a partition's is its disk's). */
async function queueDir(path: string): Promise<string> {
  const info = await stat(path);
  const major = Math.floor(info.rdev / 256) & 0xfff;
  const minor = (info.rdev & 0xff) | ((info.rdev >> 12) & 0xfff00);
  const dir = await realpath(`/sys/dev/block/${major}:${minor}`);
  const isPartition = await stat(`${dir}/partition`).then(
    () => true,
    () => false,
  );
  return isPartition ? `${dir}/../queue` : `${dir}/queue`;
}

/**
 * Whether the device can zero ranges cheaply: it advertises WRITE ZEROES (loop devices do it with fallocate,
 * NVMe and SSDs by deallocating) and is not rotational. A spinning disk's WRITE SAME writes every sector,
 * which over a whole disk takes hours: there the image's zeros are written instead.
 */
export async function supportsCheapZeroing(path: string): Promise<boolean> {
  try {
    const queue = await queueDir(path);
    const maxBytes = Number((await readFile(`${queue}/write_zeroes_max_bytes`, "utf8")).trim());
    const rotational = (await readFile(`${queue}/rotational`, "utf8")).trim() === "1";
    return maxBytes > 0 && !rotational;
  } catch {
    return false;
  }
}

/**
 * Makes a region of the target read as zeros cheaply, if it can: a file is truncated (whole file only: the
 * caller is about to rewrite it); a non-rotational block device is zeroed with an offloaded WRITE ZEROES.
 * Returns whether the region now reads as zeros.
 */
export async function zeroCheaply(
  target: TargetInfo,
  region: { offset: number; length: number },
  signal?: AbortSignal,
): Promise<boolean> {
  if (target.kind === "file") {
    const handle = await open(target.path, "r+");
    try {
      await handle.truncate(0);
      await handle.truncate(target.size);
    } finally {
      await handle.close();
    }
    return true;
  }
  if (!(await supportsCheapZeroing(target.path))) return false;
  const result = await exec(
    "blkdiscard",
    ["--zeroout", "--offset", String(region.offset), "--length", String(region.length), target.path],
    { signal, timeoutMs: 30 * 60_000 },
  );
  return result.code === 0;
}

/** Asks the kernel to re-read a disk's partition table (best effort: a file has none to re-read). */
export async function rereadPartitions(target: TargetInfo, signal?: AbortSignal): Promise<void> {
  if (target.kind !== "block") return;
  await exec("blockdev", ["--rereadpt", target.path], { signal, timeoutMs: 60_000 });
}
