import { AGENT_STEPS } from "../../../shared/agent-steps.ts";
import type { RaidInterface } from "../interfaces.ts";
import { agentStep, type AgentStepRun } from "../step.ts";
import { logicalDisksToCreate, type ApplyConfiguration, type CreateConfiguration } from "./raid-steps.ts";

/** What "building" does without a ramdisk: the node's raid_config says what was asked for. */
const RUNS: Readonly<Record<string, AgentStepRun>> = {
  async create_configuration(task, raw) {
    const args = raw as CreateConfiguration; // parsed by the catalogue's schema
    await task.update({ raid_config: { logical_disks: logicalDisksToCreate(task, args) } });
  },
  async delete_configuration(task) {
    await task.update({ raid_config: {} });
  },
  async apply_configuration(task, raw) {
    const args = raw as ApplyConfiguration; // parsed by the catalogue's schema
    await task.update({ raid_config: args.raid_config, target_raid_config: args.raid_config });
  },
};

/** A RAID step the fake has no run for records nothing: fake hardware has no disks to touch. */
const nothing: AgentStepRun = async () => undefined;

/**
 * Ironic's fake RAID: "building" records the target configuration as the node's raid_config. Its steps are
 * the agent catalogue's RAID steps (names, priorities, arguments) run by the conductor itself, without a
 * ramdisk.
 */
export const fakeRaid: RaidInterface = {
  name: "fake",
  supported: true,
  validateRaidConfig: () => undefined,
  steps: AGENT_STEPS.filter((s) => s.interface === "raid").map((s) =>
    agentStep(s, { inBand: false, run: Object.hasOwn(RUNS, s.step) ? RUNS[s.step] : nothing }),
  ),
};
