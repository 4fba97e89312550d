import type { RaidInterface } from "../interfaces.ts";
import { agentStep } from "../step.ts";
import {
  logicalDisksToCreate,
  raidStep,
  type ApplyConfiguration,
  type CreateConfiguration,
} from "./raid-steps.ts";

/**
 * Ironic's fake RAID: "building" records the target configuration as the node's raid_config. Its steps are
 * the agent catalogue's (names, priorities, arguments) run by the conductor itself, without a ramdisk.
 */
export const fakeRaid: RaidInterface = {
  name: "fake",
  supported: true,
  validateRaidConfig: () => undefined,
  steps: [
    agentStep(raidStep("create_configuration"), {
      inBand: false,
      async run(task, raw) {
        const args = raw as CreateConfiguration; // parsed by the catalogue's schema
        await task.update({ raid_config: { logical_disks: logicalDisksToCreate(task, args) } });
      },
    }),
    agentStep(raidStep("delete_configuration"), {
      inBand: false,
      async run(task) {
        await task.update({ raid_config: {} });
      },
    }),
    agentStep(raidStep("apply_configuration"), {
      inBand: false,
      async run(task, raw) {
        const args = raw as ApplyConfiguration; // parsed by the catalogue's schema
        await task.update({ raid_config: args.raid_config, target_raid_config: args.raid_config });
      },
    }),
  ],
};
