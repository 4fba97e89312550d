import { eraseDeviceMetadata } from "../disk/erase-metadata.ts";
import type { CommandHandler } from "./command.ts";
import { step } from "./command-failure.ts";
import { requireMd } from "./require-md.ts";

/**
 * raid.delete_configuration for software RAID: stops every running array, then zeroes the md superblock of
 * every device that has one (members of the arrays just stopped, and foreign ones from an earlier life
 * that nothing assembled), then wipes the partition tables of the disks that held them.
 * @throws CodedError NOT_SUPPORTED without md; COMMAND_FAILED naming the array or device that failed.
 */
export const deleteRaid: CommandHandler<"delete_raid"> = async (_args, context) => {
  const { backend, signal, progress, logger } = context;
  const md = requireMd(backend);
  const arrays = await md.listArrays();
  for (const array of [...arrays].reverse()) {
    progress({ step: "delete_raid", message: `stopping ${array.device}` });
    await step(`stopping ${array.device}`, () => md.stop(array.device, signal));
  }
  const members = await md.devicesWithSuperblock(signal);
  const holders = new Set<string>(arrays.flatMap((array) => array.holders));
  for (const member of members) {
    progress({ step: "delete_raid", message: `zeroing the md superblock of ${member}` });
    await step(`zeroing the superblock of ${member}`, () => md.zeroSuperblock(member, signal));
    holders.add(await md.diskOf(member));
  }
  const wiped = [...holders].sort();
  for (const disk of wiped) {
    progress({ step: "delete_raid", message: `wiping the partition table of ${disk}` });
    await step(`wiping ${disk}`, () => eraseDeviceMetadata(disk, { signal, logger }));
  }
  logger.info({ arrays: arrays.map((a) => a.device), members, wiped }, "software RAID deleted");
  return {
    stopped: arrays.map((array) => array.device),
    superblocks_zeroed: members,
    disks_wiped: wiped,
  };
};
