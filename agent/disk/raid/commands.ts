import type { ArrayPlan, HolderPlan, PartitionRole } from "./plan.ts";

/** GPT partition type GUIDs (as sfdisk takes them). */
export const GPT_TYPES: Record<PartitionRole, string> = {
  bios_boot: "21686148-6449-6E6F-744E-656564454649",
  esp: "C12A7328-F81F-11D2-BA4B-00A0C93EC93B",
  raid: "A19D880F-05FC-4D3B-A006-743F0F84911E",
};

const MIB = 1024 * 1024;

/** RAID member partitions are named for their array ("anvil-md0"), which is how a later boot re-assembles it. */
export const ARRAY_PARTITION_PREFIX = "anvil-";

/**
 * The sfdisk script that writes a holder's GPT: every partition at its planned start and size (in MiB; the
 * plan is 1 MiB aligned), named for its role.
 */
export function sfdiskScript(holder: HolderPlan): string {
  const lines = holder.partitions.map((partition) => {
    const name = partition.role === "raid" ? `${ARRAY_PARTITION_PREFIX}${partition.md}` : partition.role;
    return `start=${partition.startBytes / MIB}MiB, size=${partition.sizeBytes / MIB}MiB, type=${GPT_TYPES[partition.role]}, name=${name}`;
  });
  return ["label: gpt", ...lines, ""].join("\n");
}

/**
 * mdadm's argv that creates one planned array. Metadata 1.2 (superblock near the start): GRUB reads it
 * (mdraid1x), and the ESPs are plain partitions beside the arrays, so no firmware ever has to read an md
 * member directly (which would need 1.0, superblock at the end).
 */
export function mdadmCreateArgs(array: ArrayPlan, metadata: "1.0" | "1.2" = "1.2"): string[] {
  return [
    "--create",
    array.device,
    "--run",
    `--metadata=${metadata}`,
    `--level=${array.level}`,
    `--raid-devices=${array.members.length}`,
    ...(array.name === undefined ? [] : [`--name=${array.name}`]),
    ...array.members,
  ];
}

/** Assembles an array from its members under a chosen device, degraded if a member is missing. */
export function mdadmAssembleArgs(device: string, members: readonly string[]): string[] {
  return ["--assemble", "--run", device, ...members];
}

export function mdadmStopArgs(device: string): string[] {
  return ["--stop", device];
}

export function mdadmZeroSuperblockArgs(member: string): string[] {
  return ["--zero-superblock", member];
}

/** `mdadm --examine` exits 0 only when the device carries an md superblock. */
export function mdadmExamineArgs(device: string): string[] {
  return ["--examine", "--brief", device];
}
