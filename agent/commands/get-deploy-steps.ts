import type { StepDescriptor } from "../../shared/steps.ts";
import { step } from "./agent-step.ts";
import type { CommandHandler } from "./command.ts";

/**
 * The agent's deploy steps. write_image runs at 80 as Ironic's `deploy.write_image`; the bootloader at 60,
 * where Ironic's `prepare_instance_boot` asks the agent to install it (after the image, before the reboot).
 */
export const DEPLOY_STEPS: readonly StepDescriptor[] = [
  step({ interface: "deploy", step: "write_image", priority: 80 }),
  step(
    { interface: "deploy", step: "install_bootloader", priority: 60 },
    {
      argsinfo: {
        root_uuid: { description: "UUID or PARTUUID of the root filesystem", required: false },
        boot_mode: { description: "bios or uefi (default: as the ramdisk booted)", required: false },
      },
    },
  ),
];

export const getDeploySteps: CommandHandler<"get_deploy_steps"> = async () => ({
  deploy_steps: DEPLOY_STEPS,
});
