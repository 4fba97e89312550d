import type { PowerState, PowerTarget } from "../../shared/states.ts";
import type { DriverTask, TaskPowerTarget } from "../drivers/task-context.ts";

/** A task that can say whether it holds its node's exclusive lock (the conductor's Task). */
export type PowerTask = DriverTask & { readonly held: boolean };

/** Power was asked of a task that does not hold the node's exclusive lock (a programming error). */
export class PowerWithoutLock extends Error {
  constructor(uuid: string) {
    super(`node ${uuid}: power is only switched under the node's exclusive lock`);
    this.name = "PowerWithoutLock";
  }
}

/** The state a power target leaves the node in. */
export function powerStateAfter(target: PowerTarget | TaskPowerTarget): PowerState {
  return target === "power off" || target === "soft power off" ? "power off" : "power on";
}

/**
 * The one place the conductor switches a node's power (Ironic's utils.node_power_action): the operator's power
 * action, a flow's reboot into the ramdisk, a failure path's power off and the power sync's correction all end
 * here, with the node's exclusive lock held. Records the state reached and clears target_power_state.
 * `cancellable: false` keeps going when the task was aborted (a failure path powering a node off).
 * @throws PowerWithoutLock, DriverError (the BMC), NodeLocked (the reservation was lost meanwhile)
 */
export async function applyPower(
  task: PowerTask,
  target: PowerTarget | TaskPowerTarget,
  options: { cancellable?: boolean } = {},
): Promise<PowerState> {
  if (!task.held) throw new PowerWithoutLock(task.node.uuid);
  const desired = powerStateAfter(target);
  const soft = target === "soft power off" || target === "soft rebooting";
  const call = {
    ...(soft ? { soft } : {}),
    ...(options.cancellable === false ? {} : { signal: task.signal }),
  };
  const node = await task.driverNode();
  if (target === "reboot" || target === "rebooting" || target === "soft rebooting")
    await task.hw.power.reboot(node, call);
  else await task.hw.power.setPowerState(node, desired, call);
  await task.update({ power_state: desired, target_power_state: null });
  return desired;
}
