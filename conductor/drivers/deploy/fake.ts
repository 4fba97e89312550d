import { setTimeout as sleep } from "node:timers/promises";
import type { DeployInterface } from "../interfaces.ts";
import { NoArgs, defineStep } from "../step.ts";

/**
 * Ironic's fake vendor interface's service step (FakeVendorB.log_passthrough): runs without the ramdisk and
 * only logs. Anvil has no vendor interface object, so fake-hardware's deploy interface declares it.
 */
const logPassthrough = defineStep({
  kind: "service",
  interface: "vendor",
  step: "log_passthrough",
  priority: 0,
  requiresRamdisk: false,
  args: NoArgs,
  run(task) {
    task.log.info({ node: task.node.uuid }, "fake vendor log_passthrough service step");
    return Promise.resolve();
  },
});

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
    logPassthrough,
  ],
};
