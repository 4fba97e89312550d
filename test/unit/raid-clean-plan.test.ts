import { describe, expect, it } from "vitest";
import { agentDeploy } from "../../conductor/drivers/deploy/agent.ts";
import type { NodeInterfaces } from "../../conductor/drivers/hardware-type.ts";
import { agentRaidInterface } from "../../conductor/drivers/raid/agent.ts";
import type { RaidStepPriorities } from "../../conductor/drivers/raid/agent.ts";
import {
  automatedPlan,
  declaredSteps,
  mergeAgentSteps,
  parseReportedSteps,
  stepId,
} from "../../conductor/tasks/step-plan.ts";
import { offeredSteps } from "../../agent/commands/registry.ts";

const CLEAN_STEPS = await offeredSteps("clean");

/** The automated clean plan of a node with the direct deploy and agent RAID, after the agent reported its steps. */
function automatedClean(priorities: RaidStepPriorities): string[] {
  const interfaces = {
    deploy: agentDeploy,
    inspect: { name: "agent", inBand: true },
    raid: agentRaidInterface(priorities),
  } as unknown as NodeInterfaces;
  const reported = parseReportedSteps({ clean_steps: CLEAN_STEPS }, "clean");
  return automatedPlan(mergeAgentSteps(declaredSteps(interfaces, "clean"), reported)).map(stepId);
}

describe("automated cleaning of a node with software RAID", () => {
  it("runs only the metadata erase by default (the agent skips RAID members and erases the array), as Ironic", () => {
    expect(automatedClean({})).toEqual(["deploy.erase_devices_metadata"]);
  });

  it("rebuilds the RAID around the metadata erase when the conductor sets Ironic's RAID step priorities", () => {
    expect(automatedClean({ deleteConfiguration: 100, createConfiguration: 98 })).toEqual([
      "raid.delete_configuration",
      "deploy.erase_devices_metadata",
      "raid.create_configuration",
    ]);
  });

  it("the conductor's priority wins over the agent's, and 0 keeps a step out of automated cleaning", () => {
    expect(automatedClean({ deleteConfiguration: 0, createConfiguration: 10 })).toEqual([
      "deploy.erase_devices_metadata",
      "raid.create_configuration",
    ]);
  });

  it("a RAID step with a configured priority still needs the agent to offer it", () => {
    const interfaces = {
      deploy: agentDeploy,
      inspect: { name: "agent", inBand: true },
      raid: agentRaidInterface({ deleteConfiguration: 100 }),
    } as unknown as NodeInterfaces;
    const withoutRaid = parseReportedSteps(
      { clean_steps: CLEAN_STEPS.filter((s) => s.interface !== "raid") },
      "clean",
    );
    const plan = automatedPlan(mergeAgentSteps(declaredSteps(interfaces, "clean"), withoutRaid));
    expect(plan.map(stepId)).toEqual(["deploy.erase_devices_metadata"]);
  });
});
