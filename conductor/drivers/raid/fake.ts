import type { RaidInterface } from "../interfaces.ts";
import { NoArgs, defineStep } from "../step.ts";
import { ApplyConfigurationArgs, CreateConfigurationArgs, logicalDisksToCreate } from "./raid-steps.ts";

/** Ironic's fake RAID: "building" records the target configuration as the node's raid_config. */
export const fakeRaid: RaidInterface = {
  name: "fake",
  supported: true,
  validateRaidConfig: () => undefined,
  steps: [
    defineStep({
      kind: "clean",
      interface: "raid",
      step: "create_configuration",
      priority: 0,
      args: CreateConfigurationArgs,
      async run(task, args) {
        await task.update({ raid_config: { logical_disks: logicalDisksToCreate(task, args) } });
      },
    }),
    defineStep({
      kind: "clean",
      interface: "raid",
      step: "delete_configuration",
      priority: 0,
      args: NoArgs,
      async run(task) {
        await task.update({ raid_config: {} });
      },
    }),
    defineStep({
      kind: "deploy",
      interface: "raid",
      step: "apply_configuration",
      priority: 0,
      args: ApplyConfigurationArgs,
      async run(task, args) {
        await task.update({ raid_config: args.raid_config, target_raid_config: args.raid_config });
      },
    }),
  ],
};
