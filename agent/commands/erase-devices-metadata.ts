import { eraseDeviceMetadata } from "../disk/erase-metadata.ts";
import type { EraseMetadataResult } from "../disk/erase-metadata.ts";
import { CodedError } from "../../shared/errors.ts";
import type { CommandHandler } from "./command.ts";

/**
 * Wipes partition tables, RAID superblocks and filesystem signatures of every disk (or the named ones,
 * which must be disks of this machine), one after the other, reporting each as a step.
 */
export const eraseDevicesMetadata: CommandHandler<"erase_devices_metadata"> = async (args, context) => {
  const { backend, signal, progress, logger } = context;
  const disks = (await backend.disks()).map((disk) => disk.name);
  const devices = args.devices ?? disks;
  const unknown = devices.filter((device) => !disks.includes(device));
  if (unknown.length > 0)
    throw new CodedError("BAD_ARGS", `not disks of this machine: ${unknown.join(", ")}`);
  const erased: EraseMetadataResult[] = [];
  for (const [index, device] of devices.entries()) {
    signal.throwIfAborted();
    progress({ step: `erase_devices_metadata ${device}`, message: `disk ${index + 1} of ${devices.length}` });
    try {
      erased.push(await eraseDeviceMetadata(device, { signal, logger }));
    } catch (error) {
      if (signal.aborted) throw error;
      throw new CodedError("COMMAND_FAILED", `${device}: ${(error as Error).message}`, { cause: error });
    }
  }
  return { devices: erased };
};
