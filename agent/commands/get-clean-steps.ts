import type { StepDescriptor } from "../../shared/steps.ts";
import { step } from "./agent-step.ts";
import type { CommandHandler } from "./command.ts";

/**
 * The agent's clean steps, with the priorities Ironic's defaults give them: the metadata erase runs in
 * automated cleaning (99); a full or express erase and the RAID steps (0) only when an operator asks
 * (manual cleaning). The conductor maps each to the agent command of the same job.
 */
export const CLEAN_STEPS: readonly StepDescriptor[] = [
  step({ interface: "deploy", step: "erase_devices", priority: 0 }, { abortable: true }),
  step({ interface: "deploy", step: "erase_devices_metadata", priority: 99 }, { abortable: true }),
  step({ interface: "deploy", step: "erase_devices_express", priority: 0 }, { abortable: true }),
  step({ interface: "raid", step: "delete_configuration", priority: 0 }),
  step(
    { interface: "raid", step: "create_configuration", priority: 0 },
    {
      argsinfo: {
        create_root_volume: {
          description: "whether to create the root volume (default true)",
          required: false,
        },
        create_nonroot_volumes: {
          description: "whether to create the other volumes (default true)",
          required: false,
        },
      },
    },
  ),
];

export const getCleanSteps: CommandHandler<"get_clean_steps"> = async () => ({ clean_steps: CLEAN_STEPS });
