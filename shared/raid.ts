import { z } from "zod";

/**
 * Ironic's RAID configuration (`target_raid_config` / `raid_config`), as its raid_config_schema.json
 * defines it: a non-empty list of logical disks, each with a level and a size. Software RAID (controller
 * "software") is built by the agent with mdadm; `physical_disks` then holds root-device-style hints (or
 * device names) for the holders, as ironic-python-agent reads them.
 */
export const RAID_LEVELS = ["JBOD", "0", "1", "2", "5", "6", "1+0", "5+0", "6+0"] as const;
export type RaidLevel = (typeof RAID_LEVELS)[number];
/** The levels mdadm builds for controller "software". */
export const SOFTWARE_RAID_LEVELS: readonly RaidLevel[] = ["0", "1", "1+0", "5", "6"];
export const SOFTWARE_RAID_CONTROLLER = "software";

/** A holder: a device name ("/dev/sda") or root device hints ({"size": ">= 100"}) that pick one disk. */
const PhysicalDiskSchema = z.union([z.string().min(1).max(255), z.record(z.string(), z.unknown())]);

export const LogicalDiskSchema = z
  .object({
    // NOTE: Ironic's schema says integer with exclusiveMinimum 0: a 0 GiB volume is refused.
    size_gb: z.union([z.number().int().min(1), z.literal("MAX")]),
    raid_level: z.enum(RAID_LEVELS),
    volume_name: z.string().min(1).max(255).optional(),
    is_root_volume: z.boolean().optional(),
    share_physical_disks: z.boolean().optional(),
    disk_type: z.enum(["hdd", "ssd"]).optional(),
    interface_type: z.enum(["sata", "scsi", "sas"]).optional(),
    number_of_physical_disks: z.number().int().min(1).optional(),
    controller: z.string().min(1).max(255).optional(),
    physical_disks: z.array(PhysicalDiskSchema).min(1).max(64).optional(),
  })
  .strict()
  // Ironic's schema: "dependencies": {"physical_disks": ["controller"]}.
  .refine((disk) => disk.physical_disks === undefined || disk.controller !== undefined, {
    message: "physical_disks needs a controller",
    path: ["controller"],
  });
export type LogicalDisk = z.infer<typeof LogicalDiskSchema>;

export const RaidConfigSchema = z
  .object({ logical_disks: z.array(LogicalDiskSchema).min(1).max(64) })
  .strict()
  .superRefine((config, ctx) => {
    const roots = config.logical_disks.filter((d) => d.is_root_volume === true).length;
    if (roots > 1) ctx.addIssue({ code: "custom", message: "only one logical disk may be the root volume" });
  });
export type RaidConfig = z.infer<typeof RaidConfigSchema>;

/** Whether a logical disk is built by the agent with mdadm. */
export function isSoftwareRaid(disk: LogicalDisk): boolean {
  return disk.controller === SOFTWARE_RAID_CONTROLLER;
}

/**
 * A logical disk as the agent built it (what `raid_config` records after create_configuration): the
 * requested fields, the md device, its member partitions and the disks holding them.
 */
export const CreatedLogicalDiskSchema = z.object({
  size_gb: z.union([z.number().int().min(1), z.literal("MAX")]),
  raid_level: z.enum(RAID_LEVELS),
  volume_name: z.string().optional(),
  is_root_volume: z.boolean(),
  controller: z.literal(SOFTWARE_RAID_CONTROLLER),
  /** The holder disks' device names. */
  physical_disks: z.array(z.string()),
  /** The md device, e.g. /dev/md0. */
  device: z.string(),
  /** The array's member partitions, in mdadm's order. */
  members: z.array(z.string()),
  /** Bytes of the array as the kernel reports it. */
  size_bytes: z.number().int().nonnegative(),
  /** Hints that pick this volume again (Ironic copies a root volume's into properties.root_device). */
  root_device_hint: z.object({ name: z.string() }),
});
export type CreatedLogicalDisk = z.infer<typeof CreatedLogicalDiskSchema>;

export const CreatedRaidConfigSchema = z.object({
  logical_disks: z.array(CreatedLogicalDiskSchema),
  /** Per holder, the boot partition the bootloader goes to (BIOS boot or EFI system partition). */
  boot_partitions: z.array(
    z.object({ disk: z.string(), partition: z.string(), kind: z.enum(["bios", "esp"]) }),
  ),
});
export type CreatedRaidConfig = z.infer<typeof CreatedRaidConfigSchema>;
