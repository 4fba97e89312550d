import { DONE, type Flow } from "./flow.ts";

/** enroll → manageable: the power credentials must work (Ironic's verify step). */
export const verify: Flow = {
  async start(task) {
    const node = await task.driverNode();
    task.hw.power.validate(node);
    task.hw.management.validate(node);
    const state = await task.hw.power.getPowerState(node, { signal: task.signal });
    await task.update({ power_state: state });
    return DONE;
  },
};
