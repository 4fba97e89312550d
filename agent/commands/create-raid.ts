import { CodedError } from "../../shared/errors.ts";
import type { CreatedLogicalDisk, CreatedRaidConfig } from "../../shared/raid.ts";
import { isSoftwareRaid, SOFTWARE_RAID_CONTROLLER } from "../../shared/raid.ts";
import { planSoftwareRaid, RaidPlanError } from "../disk/raid/plan.ts";
import type { CommandHandler } from "./command.ts";
import { step } from "./command-failure.ts";
import { requireMd } from "./require-md.ts";

/**
 * raid.create_configuration for software RAID: plans the layout (every holder gets a GPT with a boot
 * partition, then one partition per logical disk), partitions the holders, creates the arrays (the root
 * volume as /dev/md0) and returns them as Ironic's raid_config. Arrays may still be resyncing when it
 * returns: they are usable meanwhile.
 * @throws CodedError BAD_ARGS for a request the disks cannot satisfy; NOT_SUPPORTED without md;
 *   COMMAND_FAILED when arrays already exist or a tool fails (the message names the disk or array).
 */
export const createRaid: CommandHandler<"create_raid"> = async (args, context) => {
  const { backend, signal, progress, logger } = context;
  const md = requireMd(backend);
  const foreign = args.logical_disks.filter((disk) => !isSoftwareRaid(disk));
  if (foreign.length > 0) {
    throw new CodedError(
      "BAD_ARGS",
      `the agent builds software RAID only: logical disks need controller "${SOFTWARE_RAID_CONTROLLER}"`,
    );
  }
  const existing = await md.listArrays();
  if (existing.length > 0) {
    throw new CodedError(
      "COMMAND_FAILED",
      `software RAID already exists (${existing.map((a) => a.device).join(", ")}): run raid.delete_configuration first`,
    );
  }
  const bootMode = args.boot_mode ?? (await backend.inventory({ signal })).boot.current_boot_mode;
  const disks = (await backend.disks()).filter((disk) => !/^\/dev\/md/.test(disk.name));
  let plan;
  try {
    plan = planSoftwareRaid(args.logical_disks, disks, { bootMode });
  } catch (error) {
    if (error instanceof RaidPlanError) throw new CodedError("BAD_ARGS", error.message);
    throw error;
  }
  logger.info({ plan }, "software RAID plan");
  for (const holder of plan.holders) {
    progress({ step: "create_raid", message: `partitioning ${holder.disk}` });
    await step(`partitioning ${holder.disk}`, () => md.partition(holder, signal));
  }
  const created: CreatedLogicalDisk[] = [];
  for (const array of plan.arrays) {
    progress({ step: "create_raid", message: `creating ${array.device} (${array.members.join(" ")})` });
    const running = await step(`creating ${array.device}`, () => md.create(array, signal));
    const logical = args.logical_disks[array.logicalDisk]!;
    created.push({
      size_gb: logical.size_gb,
      raid_level: logical.raid_level,
      ...(logical.volume_name === undefined ? {} : { volume_name: logical.volume_name }),
      is_root_volume: array.isRoot,
      controller: SOFTWARE_RAID_CONTROLLER,
      physical_disks: array.holders,
      device: array.device,
      members: array.members,
      size_bytes: running.sizeBytes,
      root_device_hint: { name: array.device },
    });
    logger.info({ device: array.device, sync: running.syncAction }, "md array running");
  }
  const result: CreatedRaidConfig = {
    logical_disks: created,
    boot_partitions: plan.holders.map((holder) => ({
      disk: holder.disk,
      partition: holder.partitions[0]!.path,
      kind: holder.partitions[0]!.role === "esp" ? "esp" : "bios",
    })),
  };
  return { raid_config: result };
};
