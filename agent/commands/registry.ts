import { collectLogs } from "./collect-logs.ts";
import type { CommandTable } from "./command.ts";
import { createRaid } from "./create-raid.ts";
import { deleteRaid } from "./delete-raid.ts";
import { eraseDevices } from "./erase-devices.ts";
import { eraseDevicesMetadata } from "./erase-devices-metadata.ts";
import { getCleanSteps } from "./get-clean-steps.ts";
import { getDeploySteps } from "./get-deploy-steps.ts";
import { getInventory } from "./get-inventory.ts";
import { installBootloader } from "./install-bootloader.ts";
import { powerOff } from "./power-off.ts";
import { reboot } from "./reboot.ts";
import { syncDisks } from "./sync.ts";
import { writeImage } from "./write-image.ts";

/** Every command this agent implements; a name missing here answers NOT_SUPPORTED. */
export const COMMANDS: CommandTable = {
  get_inventory: getInventory,
  get_clean_steps: getCleanSteps,
  get_deploy_steps: getDeploySteps,
  erase_devices: eraseDevices,
  erase_devices_metadata: eraseDevicesMetadata,
  create_raid: createRaid,
  delete_raid: deleteRaid,
  write_image: writeImage,
  install_bootloader: installBootloader,
  sync: syncDisks,
  reboot,
  power_off: powerOff,
  collect_logs: collectLogs,
};
