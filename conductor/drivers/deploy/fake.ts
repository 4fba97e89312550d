import { setTimeout as sleep } from "node:timers/promises";
import type { DeployInterface } from "../interfaces.ts";
import { NoArgs, defineStep } from "../step.ts";

/** Ironic's fake deploy: one core step that pauses (the configured fake delay) and leaves the node on. */
export const fakeDeploy: DeployInterface = {
  name: "fake",
  inBand: false,
  steps: [
    defineStep({
      kind: "deploy",
      interface: "deploy",
      step: "deploy",
      priority: 100,
      args: NoArgs,
      async run(task) {
        await sleep(task.deps.config.fakeDelayMs, undefined, { signal: task.signal });
        await task.setPower("power on");
      },
    }),
  ],
};
