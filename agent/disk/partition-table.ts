import { open } from "node:fs/promises";
import type { PartitionInfo, PartitionLayout } from "../../shared/image.ts";
import { exec } from "../../shared/system/exec.ts";
import type { TargetInfo } from "./target.ts";

/** Ironic and IPA give the config drive partition 64 MiB. */
export const CONFIGDRIVE_MB = 64;

export class PartitionError extends Error {
  override name = "PartitionError";
}

async function run(command: string, args: string[], options: { signal?: AbortSignal; input?: string } = {}) {
  const result = await exec(command, args, {
    signal: options.signal,
    input: options.input,
    timeoutMs: 60_000,
  });
  if (result.code !== 0) {
    throw new PartitionError(`${command} ${args.join(" ")} failed (${result.code}): ${result.stderr.trim()}`);
  }
  return result.stdout;
}

/** Reads one GPT partition's place and GUID with sgdisk. */
export async function gptPartition(
  target: TargetInfo,
  number: number,
  signal?: AbortSignal,
): Promise<PartitionInfo> {
  const text = await run("sgdisk", [`--info=${number}`, target.path], { signal });
  const first = /First sector: (\d+)/.exec(text);
  const sectors = /Partition size: (\d+) sectors/.exec(text);
  const guid = /Partition unique GUID: ([0-9A-Fa-f-]+)/.exec(text);
  if (!first || !sectors || !guid)
    throw new PartitionError(`partition ${number} of ${target.path} not found`);
  return {
    number,
    start_bytes: Number(first[1]) * target.sectorSize,
    size_bytes: Number(sectors[1]) * target.sectorSize,
    uuid: (guid[1] ?? "").toLowerCase(),
  };
}

/**
 * Writes a new GPT for a partition image: root, then optional swap, ephemeral and config drive partitions.
 * Returns them by role.
 * @throws PartitionError when sgdisk fails (e.g. the disk is too small)
 */
export async function createPartitionLayout(
  target: TargetInfo,
  layout: PartitionLayout,
  signal?: AbortSignal,
): Promise<Record<string, PartitionInfo>> {
  const roles: { role: string; mb: number; type: string }[] = [
    { role: "root", mb: layout.root_mb, type: "8300" },
  ];
  if (layout.swap_mb) roles.push({ role: "swap", mb: layout.swap_mb, type: "8200" });
  if (layout.ephemeral_mb) roles.push({ role: "ephemeral", mb: layout.ephemeral_mb, type: "8300" });
  if (layout.configdrive) roles.push({ role: "configdrive", mb: CONFIGDRIVE_MB, type: "0700" });
  await run("sgdisk", ["--zap-all", target.path], { signal });
  const args = ["--clear"];
  roles.forEach(({ role, mb, type }, i) => {
    const n = i + 1;
    args.push(
      `--new=${n}:0:+${mb}M`,
      `--typecode=${n}:${type}`,
      `--change-name=${n}:${role === "configdrive" ? "config-2" : role}`,
    );
  });
  await run("sgdisk", [...args, target.path], { signal });
  const result: Record<string, PartitionInfo> = {};
  for (const [i, { role }] of roles.entries()) result[role] = await gptPartition(target, i + 1, signal);
  return result;
}

export type TableKind = "gpt" | "mbr" | "none";

/** Looks at LBA 1 ("EFI PART") and the MBR signature (55 aa). */
export async function partitionTableKind(target: TargetInfo): Promise<TableKind> {
  const handle = await open(target.path, "r");
  try {
    const buffer = Buffer.alloc(target.sectorSize + 8);
    await handle.read(buffer, 0, buffer.length, 0);
    if (buffer.subarray(target.sectorSize, target.sectorSize + 8).toString("latin1") === "EFI PART")
      return "gpt";
    if (buffer[510] === 0x55 && buffer[511] === 0xaa) return "mbr";
    return "none";
  } finally {
    await handle.close();
  }
}

/**
 * Adds a 64 MiB partition at the end of a whole-disk image's disk for the config drive, as IPA does:
 * on GPT (after moving the backup header to the real end of the disk) it is named config-2; on MBR it is
 * a primary partition.
 * @throws PartitionError when there is no partition table, no room, or no free MBR slot
 */
export async function appendConfigDrivePartition(
  target: TargetInfo,
  signal?: AbortSignal,
): Promise<PartitionInfo> {
  const kind = await partitionTableKind(target);
  switch (kind) {
    case "gpt": {
      await run("sgdisk", ["--move-second-header", target.path], { signal });
      const listing = await run("sgdisk", ["--print", target.path], { signal });
      const numbers = [...listing.matchAll(/^\s+(\d+)\s+\d+\s+\d+/gm)].map((m) => Number(m[1]));
      const number = Math.max(0, ...numbers) + 1;
      await run(
        "sgdisk",
        [
          `--new=${number}:-${CONFIGDRIVE_MB}M:0`,
          `--typecode=${number}:0700`,
          `--change-name=${number}:config-2`,
          target.path,
        ],
        { signal },
      );
      return gptPartition(target, number, signal);
    }
    case "mbr":
      return appendMbrPartition(target, signal);
    case "none":
      throw new PartitionError(`${target.path} has no partition table to add a config drive partition to`);
  }
}

async function appendMbrPartition(target: TargetInfo, signal?: AbortSignal): Promise<PartitionInfo> {
  const dump = JSON.parse(await run("sfdisk", ["--json", target.path], { signal })) as {
    partitiontable: { partitions?: { node: string; start: number; size: number }[] };
  };
  const partitions = dump.partitiontable.partitions ?? [];
  const sector = target.sectorSize;
  const totalSectors = Math.floor(target.size / sector);
  const size = (CONFIGDRIVE_MB * 1024 * 1024) / sector;
  const align = (1024 * 1024) / sector;
  const start = Math.floor((totalSectors - size) / align) * align;
  const usedEnd = Math.max(0, ...partitions.map((p) => p.start + p.size));
  if (start < usedEnd)
    throw new PartitionError(`no room for a config drive partition at the end of ${target.path}`);
  await run("sfdisk", ["--append", "--no-reread", "--no-tell-kernel", target.path], {
    signal,
    input: `start=${start}, size=${size}, type=83\n`,
  });
  const after = JSON.parse(await run("sfdisk", ["--json", target.path], { signal })) as typeof dump;
  const index = (after.partitiontable.partitions ?? []).findIndex((p) => p.start === start);
  if (index < 0) throw new PartitionError(`sfdisk did not add the config drive partition to ${target.path}`);
  const node = after.partitiontable.partitions?.[index]?.node ?? "";
  const number = Number(/(\d+)$/.exec(node)?.[1] ?? index + 1);
  return { number, start_bytes: start * sector, size_bytes: size * sector, uuid: "" };
}
