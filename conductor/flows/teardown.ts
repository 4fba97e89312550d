import type { Task } from "../tasks/task.ts";
import type { Flow } from "./flow.ts";

/** active → deleting → cleaning: power off, forget the instance, then clean. */
export const teardown: Flow = {
  async start(task: Task) {
    await task.setPower("power off");
    await task.hw.boot.cleanUpInstance(await task.driverNode());
    const allocation = task.node.allocation_uuid;
    await task.update({
      instance_info: {},
      instance_uuid: null,
      allocation_uuid: null,
      driver_internal_info: { ...task.node.driver_internal_info, deploy_progress: undefined },
    });
    if (allocation) await task.deps.store.deleteAllocation(allocation).catch(() => undefined);
    return { kind: "chain", event: "clean" };
  },
};
