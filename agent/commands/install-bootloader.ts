import { CodedError } from "../../shared/errors.ts";
import { BootloaderError, installGrub } from "../disk/bootloader/grub.ts";
import type { CommandHandler } from "./command.ts";
import { resolveTarget } from "./target-disk.ts";

/**
 * Installs GRUB for the image written to the disk the root device hints pick (with software RAID: the root
 * volume, and GRUB goes to every holder so the machine boots from any surviving member).
 * @throws CodedError NO_ROOT_DEVICE / BAD_ARGS from the hints; COMMAND_FAILED naming the step and device.
 */
export const installBootloader: CommandHandler<"install_bootloader"> = async (args, context) => {
  const { backend, signal, progress, logger } = context;
  const { disk, array } = await resolveTarget(backend, args.root_device, signal);
  const bootMode = args.boot_mode ?? (await backend.inventory({ signal })).boot.current_boot_mode;
  const holders = array === null ? [disk.name] : array.holders;
  progress({
    step: "install_bootloader",
    message: `GRUB (${bootMode}) for ${disk.name} on ${holders.join(" ")}`,
  });
  try {
    const result = await installGrub({
      target: disk.name,
      holders,
      bootMode,
      ...(args.root_uuid === undefined ? {} : { rootUuid: args.root_uuid }),
      ...(args.image_bootloader === true ? { imageBootloader: true } : {}),
      signal,
      logger,
    });
    return { ...result, root_device: disk.name };
  } catch (error) {
    if (error instanceof BootloaderError) {
      throw new CodedError("COMMAND_FAILED", `install_bootloader on ${disk.name}: ${error.message}`, {
        cause: error,
      });
    }
    throw error;
  }
};
