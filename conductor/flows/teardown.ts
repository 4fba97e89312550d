import { powerOffDisabled } from "../tasks/power.ts";
import type { Task } from "../tasks/task.ts";
import type { Flow } from "./flow.ts";

/**
 * active → deleting → cleaning: power off, forget the instance, then clean. A node with `disable_power_off`
 * is rebooted once its instance boot configuration is gone instead, so it no longer runs the instance
 * (Ironic's tear_down, then clean_up).
 */
export const teardown: Flow = {
  async start(task: Task) {
    const keepPower = powerOffDisabled(task.node);
    if (!keepPower) await task.setPower("power off");
    await task.hw.boot.cleanUpInstance(await task.driverNode());
    if (keepPower) await task.setPower("reboot");
    const allocation = task.node.allocation_uuid;
    await task.update({
      instance_info: {},
      instance_uuid: null,
      instance_name: null,
      allocation_uuid: null,
      driver_internal_info: { ...task.node.driver_internal_info, deploy_progress: undefined },
    });
    if (allocation) await task.deps.store.deleteAllocation(allocation).catch(() => undefined);
    return { kind: "chain", event: "clean" };
  },
};
