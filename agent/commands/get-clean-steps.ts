import type { CommandHandler } from "./command.ts";

/** A clean step as Ironic lists them; priority 0 means "manual cleaning only". */
export interface CleanStep {
  step: string;
  priority: number;
  interface: "deploy" | "raid";
  reboot_requested: boolean;
  abortable: boolean;
}

/** Metadata erase runs in automated cleaning; a full erase (priority 0) only when an operator asks for it. */
export const CLEAN_STEPS: readonly CleanStep[] = [
  { step: "erase_devices", priority: 0, interface: "deploy", reboot_requested: false, abortable: true },
  {
    step: "erase_devices_metadata",
    priority: 99,
    interface: "deploy",
    reboot_requested: false,
    abortable: true,
  },
];

export const getCleanSteps: CommandHandler<"get_clean_steps"> = async () => ({
  clean_steps: CLEAN_STEPS,
});
