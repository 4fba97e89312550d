import type { EraseOptions } from "../../shared/erase.ts";
import { CodedError } from "../../shared/errors.ts";
import type { Disk } from "../../shared/inventory.ts";
import { eraseDevices } from "../disk/erase/erase-devices.ts";
import type { EraseMode } from "../disk/erase/select.ts";
import type { MdSystem } from "../disk/raid/md-system.ts";
import type { CommandContext } from "./command.ts";

const PROGRESS_EVERY_MS = 1_000;

/**
 * What erase_devices (full or express) and erase_devices_metadata share: pick the disks (software RAID
 * assembled first: an array is erased, its members skipped), erase them in parallel with per-disk progress
 * frames, and turn failures into wire errors that name disk and method.
 * @throws CodedError BAD_ARGS for disks the machine does not have, COMMAND_FAILED when a disk fails
 */
export async function eraseDisks(
  request: { step: string; mode: EraseMode; options: EraseOptions },
  context: CommandContext,
): Promise<{ devices: unknown[] }> {
  const { backend, signal, progress, logger } = context;
  // Arrays create_raid made are assembled first (nothing in the ramdisk does it at boot), so their members
  // are recognised and left alone and the arrays themselves erased, as IPA does with udev-assembled arrays.
  const raidMembers =
    backend.md === undefined ? new Set<string>() : await raidMemberDisks(backend.md, context);
  const disks = await chooseDisks(await backend.disks(), request.options.devices);
  const lastReport = new Map<string, number>();
  try {
    const devices = await eraseDevices({
      disks,
      mode: request.mode,
      options: request.options,
      raidMembers,
      tools: backend.diskTools,
      signal,
      logger,
      report: (device, report) => {
        const now = Date.now();
        const final = report.bytes_total !== undefined && report.bytes_done === report.bytes_total;
        if (
          report.bytes_done !== undefined &&
          !final &&
          now - (lastReport.get(device) ?? 0) < PROGRESS_EVERY_MS
        )
          return;
        lastReport.set(device, now);
        progress({ step: `${request.step} ${device}`, ...report });
      },
    });
    return { devices };
  } catch (error) {
    if (signal.aborted || error instanceof CodedError) throw error;
    throw new CodedError("COMMAND_FAILED", `${request.step}: ${(error as Error).message}`, { cause: error });
  }
}

/**
 * Assembles the arrays create_raid made, if nothing runs yet, and returns every disk holding an md member:
 * of a running array, or carrying a superblock nothing assembled (a member left behind by a degraded boot,
 * a foreign array). IPA skips the same disks: any whose lsblk --fs shows linux_raid_member.
 */
async function raidMemberDisks(md: MdSystem, context: CommandContext): Promise<Set<string>> {
  const { signal, logger } = context;
  let arrays = await md.listArrays();
  if (arrays.length === 0) {
    arrays = await md.assemble(signal);
    if (arrays.length > 0) logger.info({ arrays: arrays.map((a) => a.device) }, "software RAID assembled");
  }
  const members = new Set(arrays.flatMap((array) => array.holders));
  for (const device of await md.devicesWithSuperblock(signal)) members.add(await md.diskOf(device));
  return members;
}

function chooseDisks(disks: Disk[], devices: readonly string[] | undefined): Disk[] {
  if (devices === undefined) return disks;
  const unknown = devices.filter((device) => !disks.some((disk) => disk.name === device));
  if (unknown.length > 0)
    throw new CodedError("BAD_ARGS", `not disks of this machine: ${unknown.join(", ")}`);
  return disks.filter((disk) => devices.includes(disk.name));
}
