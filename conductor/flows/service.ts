import { setTimeout as sleep } from "node:timers/promises";
import { prepareInstanceBoot } from "../drivers/boot/instance-boot.ts";
import { powerOffUnlessDisabled, powerOnOrReboot } from "../tasks/power.ts";
import type { Task } from "../tasks/task.ts";
import { DONE, type Flow, type FlowOutcome } from "./flow.ts";
import { beginSteps, needsAgent, resumeSteps, withoutBookkeeping } from "./step-runner.ts";

/**
 * Back from the service ramdisk to the deployed instance (Ironic's tear_down_inband_service): power off,
 * remove the ramdisk's boot files, write the instance's boot configuration, boot from disk. `cancellable`
 * false on failure paths: the task may have been aborted, and that is when the node must get back. A node
 * with `disable_power_off` is not powered off; one reboot at the end boots it from disk instead.
 */
async function bootInstanceAgain(task: Task, options: { cancellable: boolean }): Promise<void> {
  await powerOffUnlessDisabled(task, options);
  await task.hw.boot.cleanUpRamdisk(await task.driverNode());
  await prepareInstanceBoot(task);
  await task.hw.management.setBootDevice(
    await task.driverNode(),
    { device: "disk", persistent: true },
    options.cancellable ? { signal: task.signal } : {},
  );
  await powerOnOrReboot(task, options);
}

async function finish(task: Task, outcome: FlowOutcome, usedRamdisk: boolean): Promise<FlowOutcome> {
  if (outcome.kind !== "done") return outcome;
  if (usedRamdisk) await bootInstanceAgain(task, { cancellable: true });
  return DONE;
}

/**
 * Clean-up when servicing fails or is aborted: the service step and plan are cleared, and a node that was
 * booted into the ramdisk goes back to its instance (Ironic's servicing_error_handler calls
 * tear_down_service). Never throws.
 */
export async function leaveService(task: Task): Promise<void> {
  const usedRamdisk = needsAgent(task, "service");
  await task
    .update({
      service_step: {},
      driver_internal_info: withoutBookkeeping(task.node.driver_internal_info, "service"),
    })
    .catch(() => undefined);
  if (!usedRamdisk) return;
  try {
    await bootInstanceAgain(task, { cancellable: false });
  } catch (error) {
    task.log.warn({ err: error }, "could not boot the instance again after servicing failed");
  }
}

/**
 * Servicing an active node (1.87) through the step runner: the operator's service_steps, in the deploy
 * ramdisk when a step needs the agent (service wait until it calls back), then back to the instance.
 */
export const service: Flow = {
  async start(task) {
    if (!task.interfaces.deploy.inBand)
      await sleep(task.deps.config.fakeDelayMs, undefined, { signal: task.signal });
    const outcome = await beginSteps(task, "service");
    // NOTE: a plan that finished inside beginSteps ran without booting the ramdisk (no step needed it, or fast
    // track found an agent already connected, which an active node does not have)
    return finish(task, outcome, false);
  },
  async resume(task) {
    const usedRamdisk = needsAgent(task, "service");
    return finish(task, await resumeSteps(task, "service"), usedRamdisk);
  },
  onFail: leaveService,
};
