import { z } from "zod";
import type { ApplyConfigurationArgs, CreateConfigurationArgs } from "../../../shared/agent-steps.ts";
import { RaidConfigSchema, type LogicalDisk, type RaidConfig } from "../../../shared/raid.ts";
import { Invalid } from "../../errors.ts";
import type { DriverTask as Task } from "../task-context.ts";

export type CreateConfiguration = z.infer<typeof CreateConfigurationArgs>;
export type ApplyConfiguration = z.infer<typeof ApplyConfigurationArgs>;

/**
 * The logical disks create_configuration builds from the node's target_raid_config, with Ironic's root /
 * non-root selection. @throws Invalid when there is nothing to build
 */
export function logicalDisksToCreate(
  task: Task,
  args: z.infer<typeof CreateConfigurationArgs>,
): LogicalDisk[] {
  const target = RaidConfigSchema.safeParse(task.node.target_raid_config);
  if (!target.success || target.data.logical_disks.length === 0) {
    throw new Invalid(`Node ${task.node.uuid} has no target RAID configuration.`);
  }
  const root = args.create_root_volume ?? true;
  const nonRoot = args.create_nonroot_volumes ?? true;
  const disks = target.data.logical_disks.filter((d) => (d.is_root_volume === true ? root : nonRoot));
  if (disks.length === 0) {
    throw new Invalid(
      "No logical disk is selected: both create_root_volume and create_nonroot_volumes are false.",
    );
  }
  return disks;
}

const ReportedRaidConfig = z.object({ logical_disks: z.array(z.record(z.string(), z.unknown())) });

/**
 * The raid_config recorded after a build: what the agent reports (create_raid answers
 * `{raid_config: {logical_disks}}`), else what was asked for.
 */
export function raidConfigFrom(result: unknown, requested: LogicalDisk[]): RaidConfig {
  const reported = z.object({ raid_config: ReportedRaidConfig }).safeParse(result);
  return reported.success
    ? ({ logical_disks: reported.data.raid_config.logical_disks } as RaidConfig)
    : { logical_disks: requested };
}
