import type { StepDescriptor } from "../../shared/steps.ts";

/** A step the agent runs itself (in the ramdisk), reboot never requested. */
export function step(
  declared: Pick<StepDescriptor, "interface" | "step" | "priority">,
  extra: Pick<Partial<StepDescriptor>, "abortable" | "argsinfo"> = {},
): StepDescriptor {
  return {
    ...declared,
    ...(extra.argsinfo === undefined ? {} : { argsinfo: extra.argsinfo }),
    abortable: extra.abortable ?? false,
    reboot_requested: false,
    requires_ramdisk: true,
  };
}
