import type { PowerState, PowerTarget } from "../../shared/states.ts";
import type { DriverTask, TaskPowerTarget } from "../drivers/task-context.ts";
import { Conflict } from "../errors.ts";

/** A task that can say whether it holds its node's exclusive lock (the conductor's Task). */
export type PowerTask = DriverTask & { readonly held: boolean };

/** Power was asked of a task that does not hold the node's exclusive lock (a programming error). */
export class PowerWithoutLock extends Error {
  constructor(uuid: string) {
    super(`node ${uuid}: power is only switched under the node's exclusive lock`);
    this.name = "PowerWithoutLock";
  }
}

/**
 * A power off (or soft power off) asked of a node with `disable_power_off` (API 1.95): Ironic's
 * PowerStateFailure, 409 with its text, raised by its API and again by node_power_action.
 */
export class PowerOffDisabled extends Conflict {
  constructor(target: PowerTarget | TaskPowerTarget) {
    super(`Failed to set node power state to ${target}.`);
  }
}

/** Whether the node must never be powered off (1.95; null, a removed value, counts as false). */
export function powerOffDisabled(node: { disable_power_off?: boolean | null }): boolean {
  return node.disable_power_off === true;
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
 * A node with `disable_power_off` is never powered off: the request is refused before the BMC is called.
 * @throws PowerWithoutLock, PowerOffDisabled, DriverError (the BMC), NodeLocked (the reservation was lost)
 */
export async function applyPower(
  task: PowerTask,
  target: PowerTarget | TaskPowerTarget,
  options: { cancellable?: boolean } = {},
): Promise<PowerState> {
  if (!task.held) throw new PowerWithoutLock(task.node.uuid);
  const desired = powerStateAfter(target);
  if (desired === "power off" && powerOffDisabled(task.node)) throw new PowerOffDisabled(target);
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

/**
 * The power off before boot work (Ironic's power_off_and_on, first half): skipped for a node with
 * `disable_power_off`, which stays on until powerOnOrReboot. @throws as applyPower
 */
export async function powerOffUnlessDisabled(
  task: PowerTask,
  options: { cancellable?: boolean } = {},
): Promise<void> {
  if (!powerOffDisabled(task.node)) await applyPower(task, "power off", options);
}

/**
 * After boot work (Ironic's power_off_and_on, second half): power on, or a reboot for a node with
 * `disable_power_off`, which was never powered off. @throws as applyPower
 */
export async function powerOnOrReboot(
  task: PowerTask,
  options: { cancellable?: boolean } = {},
): Promise<void> {
  await applyPower(task, powerOffDisabled(task.node) ? "reboot" : "power on", options);
}
