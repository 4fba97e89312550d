import { agentStepDescriptors } from "../../shared/agent-steps.ts";
import type { CommandName } from "../../shared/protocol.ts";
import type { StepDescriptor, StepKind } from "../../shared/steps.ts";
import { checkSmartHealth } from "./check-smart-health.ts";
import { collectLogs } from "./collect-logs.ts";
import type { CommandTable } from "./command.ts";
import { createRaid } from "./create-raid.ts";
import { deleteRaid } from "./delete-raid.ts";
import { eraseDevices } from "./erase-devices.ts";
import { eraseDevicesMetadata } from "./erase-devices-metadata.ts";
import { getInventory } from "./get-inventory.ts";
import { installBootloader } from "./install-bootloader.ts";
import { powerOff } from "./power-off.ts";
import { reboot } from "./reboot.ts";
import { syncDisks } from "./sync.ts";
import { writeImage } from "./write-image.ts";

/**
 * The handler bound to each catalogue command this agent implements (arguments arrive parsed by the
 * catalogue's schema); a name missing here answers NOT_SUPPORTED, and its steps are not offered.
 */
const HANDLERS: CommandTable = {
  get_inventory: getInventory,
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
  check_smart_health: checkSmartHealth,
};

const implemented = (name: CommandName): boolean => Object.hasOwn(COMMANDS, name);

/**
 * The steps this agent offers (IPA's get_clean_steps / get_deploy_steps): the catalogue's, for the commands
 * it has a handler for, so the conductor's view before and after the call-back is the same.
 */
export function offeredSteps(kind: Extract<StepKind, "clean" | "deploy">): StepDescriptor[] {
  return agentStepDescriptors(kind, implemented);
}

/** Every command this agent implements. */
export const COMMANDS: CommandTable = {
  ...HANDLERS,
  get_clean_steps: async () => ({ clean_steps: offeredSteps("clean") }),
  get_deploy_steps: async () => ({ deploy_steps: offeredSteps("deploy") }),
};
