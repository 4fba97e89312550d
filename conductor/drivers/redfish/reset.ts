import { DriverError } from "../errors.ts";
import type { DriverNode } from "../out-of-band.ts";
import type { SystemView } from "./system.ts";

export type ResetType =
  "On" | "ForceOn" | "ForceOff" | "GracefulShutdown" | "ForceRestart" | "GracefulRestart" | "Nmi";

/** Sets a boot device again before a power on (a BMC that took a persistent device only as one-time). */
export interface BootRestorer {
  restoreBootDevice(node: DriverNode, view: SystemView, signal?: AbortSignal): Promise<void>;
}

/**
 * Posts ComputerSystem.Reset with a ResetType the system allows (the first of `wanted` it lists; any when
 * it lists none), follows a task monitor if the BMC answers 202, and returns the HTTP status.
 * @throws DriverError when the system offers none of `wanted`, RedfishError
 */
export async function postReset(
  view: SystemView,
  wanted: readonly ResetType[],
  options: {
    signal?: AbortSignal;
    taskTimeoutMs: number;
    pollIntervalMs: number;
    accept?: readonly number[];
  },
): Promise<{ status: number; body: unknown }> {
  const action = view.system.Actions?.["#ComputerSystem.Reset"];
  if (!action) throw new DriverError(`Redfish system ${view.path} offers no ComputerSystem.Reset action`);
  const allowed = action["ResetType@Redfish.AllowableValues"];
  const resetType = allowed ? wanted.find((type) => allowed.includes(type)) : wanted[0];
  if (!resetType) {
    throw new DriverError(
      `Redfish system ${view.path} does not support reset type ${wanted.join(" or ")} (it allows ${allowed?.join(", ")})`,
      false,
      { invalidRequest: true },
    );
  }
  const response = await view.client.request({
    method: "POST",
    path: action.target,
    body: { ResetType: resetType },
    signal: options.signal,
    accept: options.accept,
  });
  if (response.status === 202 && response.location) {
    await view.client.waitForTask(response.location, {
      timeoutMs: options.taskTimeoutMs,
      intervalMs: options.pollIntervalMs,
      signal: options.signal,
    });
  }
  return response;
}
