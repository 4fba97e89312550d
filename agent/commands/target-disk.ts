import { CodedError } from "../../shared/errors.ts";
import type { Disk } from "../../shared/inventory.ts";
import { selectRootDevice } from "../../shared/root-device.ts";
import type { RootDeviceHints } from "../../shared/root-device.ts";
import type { RunningArray } from "../disk/raid/md-system.ts";
import type { HardwareBackend } from "../hardware/backend.ts";

/**
 * The disk an image goes to, chosen by root device hints (IPA's default without them). With software RAID
 * running, the root volume (/dev/md0, as create_raid makes it) is the target when no hints are given or
 * when the hints pick one of its holders; hints naming another md device or a disk outside the RAID win.
 * Arrays create_raid made in an earlier boot of the ramdisk are re-assembled first.
 * @throws CodedError NO_ROOT_DEVICE when nothing matches; BAD_ARGS when a hint cannot be parsed.
 */
export async function resolveTargetDisk(
  backend: HardwareBackend,
  hints: RootDeviceHints | null | undefined,
  signal?: AbortSignal,
): Promise<Disk> {
  return (await resolveTarget(backend, hints, signal)).disk;
}

/** As resolveTargetDisk, with the md array behind the target when it is one. */
export async function resolveTarget(
  backend: HardwareBackend,
  hints: RootDeviceHints | null | undefined,
  signal: AbortSignal = new AbortController().signal,
): Promise<{ disk: Disk; array: RunningArray | null }> {
  let arrays = backend.md === undefined ? [] : await backend.md.listArrays();
  if (backend.md !== undefined && arrays.length === 0) arrays = await backend.md.assemble(signal);
  const disks = await backend.disks();
  const arrayOf = (disk: Disk): RunningArray | null => arrays.find((a) => a.device === disk.name) ?? null;
  const root = arrays.find((array) => array.device === "/dev/md0") ?? arrays[0];
  const rootDisk = root === undefined ? undefined : disks.find((disk) => disk.name === root.device);
  const hinted = hints !== null && hints !== undefined && Object.keys(hints).length > 0;
  if (rootDisk !== undefined && !hinted) return { disk: rootDisk, array: root! };
  let disk: Disk | null;
  try {
    disk = selectRootDevice(disks, hints);
  } catch (error) {
    throw new CodedError("BAD_ARGS", (error as Error).message);
  }
  if (disk !== null && rootDisk !== undefined && root!.holders.includes(disk.name)) {
    return { disk: rootDisk, array: root! };
  }
  if (disk === null) {
    const seen = disks.map((candidate) => `${candidate.name} (${candidate.size} B)`).join(", ") || "no disks";
    throw new CodedError(
      "NO_ROOT_DEVICE",
      `no disk matches root device hints ${JSON.stringify(hints ?? {})}; found ${seen}`,
    );
  }
  return { disk, array: arrayOf(disk) };
}
