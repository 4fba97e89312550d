import type { Disk } from "../../../shared/inventory.ts";
import { GIB } from "../../../shared/inventory.ts";
import type { LogicalDisk, RaidLevel } from "../../../shared/raid.ts";
import { SOFTWARE_RAID_LEVELS } from "../../../shared/raid.ts";
import { matchesHints, RootDeviceHintsSchema } from "../../../shared/root-device.ts";
import { partitionPath } from "./partition-path.ts";

/**
 * The pure half of software RAID: from the requested logical disks and the machine's disks, which disks
 * hold which partitions (GPT, 1 MiB aligned) and which md arrays are built from them. No I/O here, so every
 * layout rule is unit-tested with fake disks; `apply.ts` carries the plan out.
 */

export type BootMode = "bios" | "uefi";
export type PartitionRole = "bios_boot" | "esp" | "raid";

export interface PlannedPartition {
  number: number;
  startBytes: number;
  sizeBytes: number;
  role: PartitionRole;
  /** The partition's device path, e.g. /dev/vda2 or /dev/nvme0n1p2. */
  path: string;
  /** For role "raid": the index of the logical disk (in the request) it belongs to. */
  logicalDisk?: number;
  /** For role "raid": the md device it is a member of ("md0"); also its GPT name, so a later boot can
   * re-assemble each array under the same number. */
  md?: string;
}

export interface HolderPlan {
  disk: string;
  sizeBytes: number;
  partitions: PlannedPartition[];
}

export interface ArrayPlan {
  /** Index of the logical disk in the request. */
  logicalDisk: number;
  /** /dev/md0 is always the root volume. */
  device: string;
  /** mdadm's --level. */
  level: string;
  /** mdadm's --name (the volume name), if the request gave one. */
  name?: string;
  /** Member partitions, in holder order. */
  members: string[];
  holders: string[];
  isRoot: boolean;
  /** Bytes of each member partition. */
  memberBytes: number;
}

export interface RaidPlan {
  holders: HolderPlan[];
  arrays: ArrayPlan[];
}

export interface PlanOptions {
  bootMode: BootMode;
  /** Default 1 MiB. */
  alignBytes?: number;
  /** The EFI system partition on every holder (UEFI). Default 128 MiB. */
  espBytes?: number;
  /** The BIOS boot partition GRUB embeds its core image into (BIOS on GPT). Default 2 MiB. */
  biosBootBytes?: number;
}

export class RaidPlanError extends Error {
  override name = "RaidPlanError";
}

const MIB = 1024 * 1024;

/** The fewest members mdadm needs (and Ironic's software RAID accepts) per level. */
export const MIN_DISKS: Partial<Record<RaidLevel, number>> = { "0": 2, "1": 2, "1+0": 4, "5": 3, "6": 4 };

/** mdadm's name for each level. */
export function mdadmLevel(level: RaidLevel): string {
  if (level === "1+0") return "10";
  if (!SOFTWARE_RAID_LEVELS.includes(level)) {
    throw new RaidPlanError(`RAID level ${level} is not available for software RAID`);
  }
  return level;
}

/** Bytes each member must hold for `bytes` of array, per level (mdadm raid10 keeps two near copies). */
export function memberBytesFor(level: RaidLevel, bytes: number, members: number): number {
  switch (level) {
    case "1":
      return bytes;
    case "0":
      return Math.ceil(bytes / members);
    case "1+0":
      return Math.ceil((bytes * 2) / members);
    case "5":
      return Math.ceil(bytes / (members - 1));
    case "6":
      return Math.ceil(bytes / (members - 2));
    case "JBOD":
    case "2":
    case "5+0":
    case "6+0":
      throw new RaidPlanError(`RAID level ${level} is not available for software RAID`);
  }
}

/**
 * Lays out software RAID for `logicalDisks` over `disks` (the candidates: whole disks, no md devices).
 * The root volume (is_root_volume, else the first) becomes /dev/md0; the others follow in request order.
 * On each holder: the boot partition first, then fixed-size volumes in request order, then the one MAX.
 * @throws RaidPlanError when a level is not software RAID, a holder cannot be found, there are fewer disks
 *   than the level needs, two MAX volumes share a holder, or the sizes do not fit.
 */
export function planSoftwareRaid(
  logicalDisks: readonly LogicalDisk[],
  disks: readonly Disk[],
  options: PlanOptions,
): RaidPlan {
  if (logicalDisks.length === 0) throw new RaidPlanError("no logical disks to create");
  const align = options.alignBytes ?? MIB;
  const bootBytes =
    options.bootMode === "uefi" ? (options.espBytes ?? 128 * MIB) : (options.biosBootBytes ?? 2 * MIB);
  const holdersOf = logicalDisks.map((logical, index) => chooseHolders(logical, index, disks));
  const rootIndex = Math.max(
    0,
    logicalDisks.findIndex((logical) => logical.is_root_volume === true),
  );

  // Every disk used by any volume gets a GPT with a boot partition first.
  const used = disks.filter((disk) => holdersOf.some((holders) => holders.includes(disk)));
  const holders = new Map<string, HolderPlan & { cursor: number; end: number }>();
  for (const disk of used) {
    const start = align;
    const end = alignDown(disk.size - align, align); // the backup GPT lives in the last MiB
    const boot: PlannedPartition = {
      number: 1,
      startBytes: start,
      sizeBytes: bootBytes,
      role: options.bootMode === "uefi" ? "esp" : "bios_boot",
      path: partitionPath(disk.name, 1),
    };
    holders.set(disk.name, {
      disk: disk.name,
      sizeBytes: disk.size,
      partitions: [boot],
      cursor: alignUp(start + bootBytes, align),
      end,
    });
  }

  const memberBytes = new Map<number, number>();
  const allocate = (index: number, bytes: number): void => {
    memberBytes.set(index, bytes);
    for (const disk of holdersOf[index] ?? []) {
      const holder = holders.get(disk.name)!;
      const number = holder.partitions.length + 1;
      if (holder.cursor + bytes > holder.end) {
        const free = Math.max(0, holder.end - holder.cursor);
        throw new RaidPlanError(
          `logical disk ${index} needs ${mib(bytes)} on ${disk.name}, which has ${mib(free)} left`,
        );
      }
      holder.partitions.push({
        number,
        startBytes: holder.cursor,
        sizeBytes: bytes,
        role: "raid",
        path: partitionPath(disk.name, number),
        logicalDisk: index,
      });
      holder.cursor += bytes;
    }
  };

  // Fixed sizes first, in request order.
  logicalDisks.forEach((logical, index) => {
    if (logical.size_gb === "MAX") return;
    const members = holdersOf[index]!.length;
    allocate(index, alignUp(memberBytesFor(logical.raid_level, logical.size_gb * GIB, members), align));
  });
  // Then MAX: what its emptiest holder has left (members of one array are equal).
  const maxOn = new Set<string>();
  logicalDisks.forEach((logical, index) => {
    if (logical.size_gb !== "MAX") return;
    for (const disk of holdersOf[index]!) {
      if (maxOn.has(disk.name)) {
        throw new RaidPlanError(`two logical disks with size_gb MAX share ${disk.name}`);
      }
      maxOn.add(disk.name);
    }
    const free = Math.min(
      ...holdersOf[index]!.map((disk) => {
        const holder = holders.get(disk.name)!;
        return holder.end - holder.cursor;
      }),
    );
    const bytes = alignDown(free, align);
    if (bytes <= 0) throw new RaidPlanError(`no space left for logical disk ${index} (size_gb MAX)`);
    allocate(index, bytes);
  });

  const order = [rootIndex, ...logicalDisks.map((_, index) => index).filter((index) => index !== rootIndex)];
  const arrays = order.map((index, mdNumber): ArrayPlan => {
    const logical = logicalDisks[index]!;
    const mine = holdersOf[index]!;
    const members = mine.map(
      (disk) => holders.get(disk.name)!.partitions.find((p) => p.logicalDisk === index)!.path,
    );
    return {
      logicalDisk: index,
      device: `/dev/md${mdNumber}`,
      level: mdadmLevel(logical.raid_level),
      ...(logical.volume_name === undefined ? {} : { name: logical.volume_name }),
      members,
      holders: mine.map((disk) => disk.name),
      isRoot: index === rootIndex,
      memberBytes: memberBytes.get(index)!,
    };
  });
  for (const array of arrays) {
    for (const holder of holders.values()) {
      const member = holder.partitions.find((p) => p.logicalDisk === array.logicalDisk);
      if (member !== undefined) member.md = array.device.replace("/dev/", "");
    }
  }
  return {
    holders: [...holders.values()].map(({ disk, sizeBytes, partitions }) => ({
      disk,
      sizeBytes,
      partitions,
    })),
    arrays,
  };
}

/**
 * The disks of one logical disk: its physical_disks (each a device name or hints matching one disk not
 * already taken), else every candidate disk; number_of_physical_disks keeps the first N.
 */
function chooseHolders(logical: LogicalDisk, index: number, disks: readonly Disk[]): Disk[] {
  const level = logical.raid_level;
  const min = MIN_DISKS[level];
  if (min === undefined) mdadmLevel(level); // throws: not a software level
  const chosen: Disk[] = [];
  if (logical.physical_disks !== undefined) {
    for (const wanted of logical.physical_disks) {
      const disk = disks.find((candidate) => !chosen.includes(candidate) && matches(candidate, wanted));
      if (disk === undefined) {
        throw new RaidPlanError(
          `logical disk ${index}: no disk matches physical disk ${JSON.stringify(wanted)} (disks: ${
            disks.map((d) => d.name).join(", ") || "none"
          })`,
        );
      }
      chosen.push(disk);
    }
  } else {
    chosen.push(...[...disks].sort((a, b) => a.name.localeCompare(b.name)));
  }
  const holders =
    logical.number_of_physical_disks === undefined
      ? chosen
      : chosen.slice(0, logical.number_of_physical_disks);
  if (logical.number_of_physical_disks !== undefined && holders.length < logical.number_of_physical_disks) {
    throw new RaidPlanError(
      `logical disk ${index}: number_of_physical_disks is ${logical.number_of_physical_disks} but only ${holders.length} disks are available`,
    );
  }
  if (holders.length < (min ?? 2)) {
    throw new RaidPlanError(
      `logical disk ${index}: RAID-${level} needs at least ${min} disks, got ${holders.length}${
        holders.length > 0 ? ` (${holders.map((d) => d.name).join(", ")})` : ""
      }`,
    );
  }
  return holders;
}

function matches(disk: Disk, wanted: string | Record<string, unknown>): boolean {
  if (typeof wanted === "string") {
    const name = wanted.startsWith("/dev/") ? wanted : `/dev/${wanted}`;
    return disk.name === name;
  }
  const hints = RootDeviceHintsSchema.safeParse(wanted);
  if (!hints.success) {
    throw new RaidPlanError(`physical disk hints ${JSON.stringify(wanted)} are not root device hints`);
  }
  try {
    return matchesHints(disk, hints.data);
  } catch (error) {
    throw new RaidPlanError((error as Error).message);
  }
}

function alignUp(value: number, align: number): number {
  return Math.ceil(value / align) * align;
}

function alignDown(value: number, align: number): number {
  return Math.floor(value / align) * align;
}

function mib(bytes: number): string {
  return `${(bytes / MIB).toFixed(0)} MiB`;
}
