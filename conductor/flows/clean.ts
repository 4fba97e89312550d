import { setTimeout as sleep } from "node:timers/promises";
import type { Task } from "../tasks/task.ts";
import { beginSteps, needsAgent, resumeSteps, withoutBookkeeping } from "./step-runner.ts";
import { DONE, type Flow, type FlowOutcome } from "./flow.ts";
import { leaveRamdisk, powerOffQuietly } from "./ramdisk.ts";

/** Manual cleaning (target manageable) returns the node to manageable, as Ironic does; automated to available. */
function isManual(task: Task): boolean {
  return task.node.target_provision_state === "manageable";
}

async function finish(task: Task, outcome: FlowOutcome, usedRamdisk: boolean): Promise<FlowOutcome> {
  if (outcome.kind !== "done") return outcome;
  if (usedRamdisk) await leaveRamdisk(task);
  return isManual(task) ? { kind: "chain", event: "manage" } : DONE;
}

/**
 * Cleaning through the step runner: the node's clean steps (automated: priority above 0; manual: the
 * operator's clean_steps), in the deploy ramdisk when a step needs the agent.
 */
export const clean: Flow = {
  async start(task) {
    // NOTE: automated_clean false skips automated cleaning, as in Ironic
    if (!isManual(task) && task.node.automated_clean === false) return DONE;
    if (!task.interfaces.deploy.inBand)
      await sleep(task.deps.config.fakeDelayMs, undefined, { signal: task.signal });
    const outcome = await beginSteps(task, "clean");
    return finish(task, outcome, needsAgent(task, "clean"));
  },
  async resume(task) {
    const usedRamdisk = needsAgent(task, "clean");
    return finish(task, await resumeSteps(task, "clean"), usedRamdisk);
  },
  async onFail(task) {
    const usedRamdisk = needsAgent(task, "clean");
    await task
      .update({
        clean_step: {},
        driver_internal_info: withoutBookkeeping(task.node.driver_internal_info, "clean"),
      })
      .catch(() => undefined);
    if (usedRamdisk || task.interfaces.deploy.inBand) await powerOffQuietly(task);
  },
};
