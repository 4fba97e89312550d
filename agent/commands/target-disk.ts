import { CodedError } from "../../shared/errors.ts";
import type { Disk } from "../../shared/inventory.ts";
import { selectRootDevice } from "../../shared/root-device.ts";
import type { RootDeviceHints } from "../../shared/root-device.ts";
import type { HardwareBackend } from "../hardware/backend.ts";

/**
 * The disk an image goes to, chosen by root device hints (IPA's default without them).
 * @throws CodedError NO_ROOT_DEVICE when nothing matches; BAD_ARGS when a hint cannot be parsed.
 */
export async function resolveTargetDisk(
  backend: HardwareBackend,
  hints: RootDeviceHints | null | undefined,
): Promise<Disk> {
  const disks = await backend.disks();
  let disk: Disk | null;
  try {
    disk = selectRootDevice(disks, hints);
  } catch (error) {
    throw new CodedError("BAD_ARGS", (error as Error).message);
  }
  if (disk === null) {
    const seen = disks.map((candidate) => `${candidate.name} (${candidate.size} B)`).join(", ") || "no disks";
    throw new CodedError(
      "NO_ROOT_DEVICE",
      `no disk matches root device hints ${JSON.stringify(hints ?? {})}; found ${seen}`,
    );
  }
  return disk;
}
