import { open } from "node:fs/promises";
import type { PartitionInfo, PartitionLayout } from "../../shared/image.ts";
import { exec } from "../../shared/system/exec.ts";
import type { TargetInfo } from "./target.ts";

// NOTE: sfdisk, not sgdisk: sgdisk calls sync(2) and sleeps a second on every write, which on a busy host
// flushes everyone's dirty pages (tens of seconds); sfdisk fsyncs only the disk it wrote.

/** Ironic and IPA give the config drive partition 64 MiB. */
export const CONFIGDRIVE_MB = 64;

const GPT_TYPE = {
  linux: "0FC63DAF-8483-4772-8E79-3D69D8477DE4",
  swap: "0657FD6D-A4AB-43C4-84E5-0933C84B4F4F",
  /** "Microsoft basic data", what an ISO 9660 config drive partition is usually typed as. */
  basicData: "EBD0A0A2-B9E5-4433-87C0-68B6B72699C7",
};

export class PartitionError extends Error {
  override name = "PartitionError";
}

interface SfdiskPartition {
  node: string;
  start: number;
  size: number;
  type: string;
  uuid?: string;
  name?: string;
}
interface SfdiskTable {
  label: "gpt" | "dos";
  lastlba?: number;
  sectorsize?: number;
  partitions?: SfdiskPartition[];
}

async function sfdisk(
  args: string[],
  options: { signal?: AbortSignal; input?: string } = {},
): Promise<string> {
  const result = await exec("sfdisk", args, {
    signal: options.signal,
    input: options.input,
    timeoutMs: 60_000,
  });
  if (result.code !== 0) {
    throw new PartitionError(`sfdisk ${args.join(" ")} failed (${result.code}): ${result.stderr.trim()}`);
  }
  return result.stdout;
}

/** The disk's partition table as sfdisk reads it. @throws PartitionError when there is none */
export async function readPartitionTable(target: TargetInfo, signal?: AbortSignal): Promise<SfdiskTable> {
  const dump = JSON.parse(await sfdisk(["--json", target.path], { signal })) as {
    partitiontable: SfdiskTable;
  };
  return dump.partitiontable;
}

function partitionNumber(node: string): number {
  return Number(/(\d+)$/.exec(node)?.[1] ?? "0");
}

function toInfo(target: TargetInfo, table: SfdiskTable, partition: SfdiskPartition): PartitionInfo {
  const sector = table.sectorsize ?? target.sectorSize;
  return {
    number: partitionNumber(partition.node),
    start_bytes: partition.start * sector,
    size_bytes: partition.size * sector,
    uuid: (partition.uuid ?? "").toLowerCase(),
  };
}

/**
 * Writes a new GPT for a partition image: root, then optional swap, ephemeral and config drive (named
 * config-2) partitions, 1 MiB aligned. Returns them by role.
 * @throws PartitionError when sfdisk fails (e.g. the disk is too small)
 */
export async function createPartitionLayout(
  target: TargetInfo,
  layout: PartitionLayout,
  signal?: AbortSignal,
): Promise<Record<string, PartitionInfo>> {
  const roles: { role: string; mb: number; type: string; name: string }[] = [
    { role: "root", mb: layout.root_mb, type: GPT_TYPE.linux, name: "root" },
  ];
  if (layout.swap_mb) roles.push({ role: "swap", mb: layout.swap_mb, type: GPT_TYPE.swap, name: "swap" });
  if (layout.ephemeral_mb) {
    roles.push({ role: "ephemeral", mb: layout.ephemeral_mb, type: GPT_TYPE.linux, name: "ephemeral" });
  }
  if (layout.configdrive) {
    roles.push({ role: "configdrive", mb: CONFIGDRIVE_MB, type: GPT_TYPE.basicData, name: "config-2" });
  }
  const script = [
    "label: gpt",
    ...roles.map(({ mb, type, name }) => `size=${mb}MiB, type=${type}, name=${name}`),
  ].join("\n");
  await sfdisk(["--wipe", "always", "--no-reread", "--no-tell-kernel", "-q", target.path], {
    signal,
    input: `${script}\n`,
  });
  const table = await readPartitionTable(target, signal);
  const result: Record<string, PartitionInfo> = {};
  roles.forEach(({ role }, i) => {
    const partition = table.partitions?.find((p) => partitionNumber(p.node) === i + 1);
    if (!partition) throw new PartitionError(`sfdisk did not create partition ${i + 1} on ${target.path}`);
    result[role] = toInfo(target, table, partition);
  });
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
 * Adds a 64 MiB partition at the end of a whole-disk image's disk for the config drive, as IPA does: on GPT
 * (after moving the backup header to the real end of the disk) it is named config-2; on MBR it is a primary
 * partition.
 * @throws PartitionError when there is no partition table, no room, or no free MBR slot
 */
export async function appendConfigDrivePartition(
  target: TargetInfo,
  signal?: AbortSignal,
): Promise<PartitionInfo> {
  const kind = await partitionTableKind(target);
  if (kind === "none") {
    throw new PartitionError(`${target.path} has no partition table to add a config drive partition to`);
  }
  // An image smaller than the disk has its GPT backup header where the image ended.
  if (kind === "gpt") await sfdisk(["--relocate", "gpt-bak-std", target.path], { signal });
  const table = await readPartitionTable(target, signal);
  const sector = table.sectorsize ?? target.sectorSize;
  const size = (CONFIGDRIVE_MB * 1024 * 1024) / sector;
  const align = (1024 * 1024) / sector;
  const lastUsable = table.lastlba ?? Math.floor(target.size / sector) - 1;
  const start = Math.floor((lastUsable + 1 - size) / align) * align;
  const usedEnd = Math.max(0, ...(table.partitions ?? []).map((p) => p.start + p.size));
  if (start < usedEnd)
    throw new PartitionError(`no room for a config drive partition at the end of ${target.path}`);
  const line =
    kind === "gpt"
      ? `start=${start}, size=${size}, type=${GPT_TYPE.basicData}, name=config-2`
      : `start=${start}, size=${size}, type=83`;
  await sfdisk(["--append", "--no-reread", "--no-tell-kernel", "-q", target.path], {
    signal,
    input: `${line}\n`,
  });
  const after = await readPartitionTable(target, signal);
  const added = after.partitions?.find((p) => p.start === start);
  if (!added) throw new PartitionError(`sfdisk did not add the config drive partition to ${target.path}`);
  return toInfo(target, after, added);
}
