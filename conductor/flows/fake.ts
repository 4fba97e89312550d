import { setTimeout as sleep } from "node:timers/promises";
import type { Task } from "../tasks/task.ts";
import { DONE, type Flow, type FlowOutcome } from "./flow.ts";

/** fake-hardware work: a configurable pause, then the power effect the real step would have. */
function fakeStep(effect?: (task: Task) => Promise<void>): Flow {
  return {
    async start(task: Task): Promise<FlowOutcome> {
      await sleep(task.deps.config.fakeDelayMs, undefined, { signal: task.signal });
      if (effect) await effect(task);
      return DONE;
    },
  };
}

export const fakeInspect = fakeStep();
export const fakeRescue = fakeStep();
