import { AGENT_STEPS } from "../../../shared/agent-steps.ts";
import { SOFTWARE_RAID_LEVELS, type LogicalDisk, type RaidConfig } from "../../../shared/raid.ts";
import { Invalid } from "../../errors.ts";
import type { DriverTask as Task } from "../task-context.ts";
import { agentCommand } from "../agent-command.ts";
import type { RaidInterface } from "../interfaces.ts";
import { agentStep, type AgentStepRun, type Step } from "../step.ts";
import {
  logicalDisksToCreate,
  raidConfigFrom,
  type ApplyConfiguration,
  type CreateConfiguration,
} from "./raid-steps.ts";

/**
 * Software RAID (controller "software") is what the agent builds, with mdadm: checked when the agent is asked
 * to build, as IPA's hardware manager refuses there. Not when the target is set: Ironic's AgentRAID validates
 * a target_raid_config against the schema only (a hardware controller's config is for a vendor hardware
 * manager in the ramdisk), and Metal3's gophercloud sets one.
 */
function checkSoftwareRaid(config: RaidConfig): void {
  for (const [index, disk] of config.logical_disks.entries()) {
    if (disk.controller !== "software") {
      throw new Invalid(
        `RAID config validation error: logical disk ${index}: the agent builds software RAID only (controller "software")`,
      );
    }
    if (!SOFTWARE_RAID_LEVELS.includes(disk.raid_level)) {
      throw new Invalid(
        `RAID config validation error: logical disk ${index}: software RAID level ${disk.raid_level} is not supported; use one of ${SOFTWARE_RAID_LEVELS.join(", ")}`,
      );
    }
  }
}

async function build(task: Task, disks: LogicalDisk[], deleteExisting: boolean): Promise<void> {
  checkSoftwareRaid({ logical_disks: disks });
  if (deleteExisting) await agentCommand(task, { name: "delete_raid", args: {} });
  const result = await agentCommand(task, { name: "create_raid", args: { logical_disks: disks } });
  await task.update({ raid_config: raidConfigFrom(result, disks) });
}

/**
 * Priorities for the RAID clean steps in automated cleaning (Ironic's [deploy] delete_configuration_priority
 * and create_configuration_priority); unset: the agent's (0, manual cleaning only).
 */
export interface RaidStepPriorities {
  deleteConfiguration?: number | undefined;
  createConfiguration?: number | undefined;
}

/** Ironic's `agent` RAID interface: software RAID built in band by the agent. */
export function agentRaidInterface(priorities: RaidStepPriorities = {}): RaidInterface {
  return {
    name: "agent",
    supported: true,
    // NOTE: Ironic's base validate_raid_config: the schema, already checked by the API
    validateRaidConfig: () => undefined,
    steps: raidSteps(priorities),
  };
}

/**
 * The conductor's side of the agent's RAID-interface steps; a catalogue step missing here sends its command
 * with its arguments as they are (agentStep's default).
 */
const RUNS: Readonly<Record<string, AgentStepRun>> = {
  create_configuration: (task, raw) => {
    const args = raw as CreateConfiguration; // parsed by the catalogue's schema
    return build(task, logicalDisksToCreate(task, args), args.delete_existing ?? true);
  },
  async delete_configuration(task) {
    await agentCommand(task, { name: "delete_raid", args: {} });
    await task.update({ raid_config: {} });
  },
  async apply_configuration(task, raw) {
    const args = raw as ApplyConfiguration; // parsed by the catalogue's schema
    await task.update({ target_raid_config: args.raid_config });
    await build(task, args.raid_config.logical_disks, args.delete_existing ?? true);
  },
};

/** Every RAID-interface step of the agent catalogue, with the conductor's configured priorities. */
function raidSteps(priorities: RaidStepPriorities): Step[] {
  const configured: Readonly<Record<string, number | undefined>> = {
    create_configuration: priorities.createConfiguration,
    delete_configuration: priorities.deleteConfiguration,
  };
  return AGENT_STEPS.filter((s) => s.interface === "raid").map((s) =>
    agentStep(s, {
      ...(Object.hasOwn(RUNS, s.step) ? { run: RUNS[s.step] } : {}),
      priority: configured[s.step],
    }),
  );
}

/** The agent RAID interface with the agent's own step priorities. */
export const agentRaid: RaidInterface = agentRaidInterface();

/** Ironic's no-raid: the node has no RAID interface. */
export const noRaid: RaidInterface = {
  name: "no-raid",
  supported: false,
  validateRaidConfig: () => undefined,
  steps: [],
};
