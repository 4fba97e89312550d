import { z } from "zod";

/**
 * Ironic's RAID configuration (`target_raid_config` / `raid_config`), as its raid_config_schema.json
 * defines it: a list of logical disks. Software RAID (controller "software") is built by the agent with
 * mdadm; `physical_disks` then holds root-device-style hints (or device names) for the holders.
 */
export const RAID_LEVELS = ["0", "1", "2", "5", "6", "1+0", "5+0", "6+0"] as const;
export type RaidLevel = (typeof RAID_LEVELS)[number];
/** The levels mdadm builds for controller "software". */
export const SOFTWARE_RAID_LEVELS: readonly RaidLevel[] = ["0", "1", "1+0", "5", "6"];

const PhysicalDiskSchema = z.union([z.string().min(1).max(255), z.record(z.string(), z.unknown())]);

export const LogicalDiskSchema = z
  .object({
    size_gb: z.union([z.number().int().min(0), z.literal("MAX")]),
    raid_level: z.enum(RAID_LEVELS),
    volume_name: z.string().min(1).max(255).optional(),
    is_root_volume: z.boolean().optional(),
    share_physical_disks: z.boolean().optional(),
    disk_type: z.enum(["hdd", "ssd"]).optional(),
    interface_type: z.enum(["sata", "scsi", "sas"]).optional(),
    number_of_physical_disks: z.number().int().min(1).optional(),
    controller: z.string().min(1).max(255).optional(),
    physical_disks: z.array(PhysicalDiskSchema).max(64).optional(),
  })
  .strict();
export type LogicalDisk = z.infer<typeof LogicalDiskSchema>;

export const RaidConfigSchema = z
  .object({ logical_disks: z.array(LogicalDiskSchema).max(64) })
  .strict()
  .superRefine((config, ctx) => {
    const roots = config.logical_disks.filter((d) => d.is_root_volume === true).length;
    if (roots > 1) ctx.addIssue({ code: "custom", message: "only one logical disk may be the root volume" });
  });
export type RaidConfig = z.infer<typeof RaidConfigSchema>;
