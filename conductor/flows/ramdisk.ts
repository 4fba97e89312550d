import { agentEndpointOf } from "../agents/endpoint.ts";
import { INDEXED_INTERNAL_KEYS } from "../db/store.ts";
import { collectRamdiskLogs, succeededReason } from "../drivers/ramdisk-logs.ts";
import { applyPower, powerOffDisabled } from "../tasks/power.ts";
import { retireAgentToken } from "../drivers/agent-token.ts";
import type { Task, TaskDeps } from "../tasks/task.ts";

/** driver_internal_info key: the identity of the conductor whose boot configuration the ramdisk boots from. */
export const RAMDISK_PREPARED_BY = INDEXED_INTERNAL_KEYS.ramdiskPreparedBy;

/**
 * The kernel arguments the ramdisk's agent reads: this conductor's agent endpoint first, then the other live
 * conductors' (so an agent whose conductor dies can reach another, which redirects it to the owner), and the
 * certificate pin.
 */
export function ramdiskAgentParams(
  deps: Pick<TaskDeps, "publicUrl" | "peerUrls" | "caFingerprint">,
): Record<string, string> {
  const urls = [deps.publicUrl(), ...(deps.peerUrls?.() ?? [])].map(agentEndpointOf);
  const pin = deps.caFingerprint;
  return { "anvil.conductor": [...new Set(urls)].join(","), ...(pin ? { "anvil.ca_fingerprint": pin } : {}) };
}

const agentParams = (task: Task): Record<string, string> => ramdiskAgentParams(task.deps);

/**
 * True when fast track may skip a reboot: the node is powered on and its agent is still connected from earlier
 * work. NOTE: the power state is asked as Ironic's is_fast_track asks it: a node powered off since (a
 * teardown) still shows its dead agent's connection until the heartbeat times out (~30 s in the lab), and a
 * deploy sent to it then waits a minute for get_deploy_steps and fails.
 */
export function canFastTrack(task: Task): boolean {
  return (
    task.deps.config.agent.fastTrack &&
    task.node.power_state === "power on" &&
    task.deps.agents.isConnected(task.node.uuid)
  );
}

/**
 * Boots the node into the deploy ramdisk: boot files (or a virtual CD), one-time PXE (or cdrom), power cycle. The previous boot's agent
 * token is retired (as by an operator's power action, the power cycle into the instance and a write_image
 * resumed after a reboot) so the new agent gets a fresh one.
 */
export async function bootIntoRamdisk(task: Task): Promise<void> {
  await retireAgentToken(task);
  const node = await task.driverNode();
  await task.hw.boot.prepareRamdisk(node, { agentParams: agentParams(task), signal: task.signal });
  const device = task.hw.boot.ramdiskBootDevice?.(node) ?? "pxe";
  await task.hw.management.setBootDevice(node, { device, persistent: false }, { signal: task.signal });
  await task.setPower(task.node.power_state === "power on" ? "reboot" : "power on");
  await task.mergeInternalInfo({
    ramdisk_booted_at: new Date().toISOString(),
    [RAMDISK_PREPARED_BY]: task.deps.holder,
  });
}

/**
 * Takeover of a node waiting for its agent: writes its ramdisk boot configuration again, on this conductor
 * and naming it first, so a reboot of the node lands here (boot files live on the conductor that wrote
 * them), and restarts the wait's timer. The agent token stays: an agent already running keeps it and
 * reconnects here. Nothing is powered.
 */
export async function rewriteRamdiskBoot(task: Task): Promise<void> {
  await task.hw.boot.prepareRamdisk(await task.driverNode(), { agentParams: agentParams(task) });
  await task.update({
    driver_internal_info: { ...task.node.driver_internal_info, [RAMDISK_PREPARED_BY]: task.deps.holder },
    // the wait's timeout counts from the takeover: the agent had no conductor to call back to before it
    provision_updated_at: new Date().toISOString(),
  });
}

/**
 * After in-band work: the ramdisk's logs when they are collected `always`, then power off and remove boot files, unless fast track keeps the agent for the next job. A
 * node with `disable_power_off` loses its boot files and is rebooted instead, out of the ramdisk (Ironic's
 * tear_down_inband_cleaning).
 */
export async function leaveRamdisk(task: Task): Promise<void> {
  await collectRamdiskLogs(task, succeededReason(task.node.provision_state), "success");
  if (task.deps.config.agent.fastTrack) return;
  if (powerOffDisabled(task.node)) {
    await task.hw.boot.cleanUpRamdisk(await task.driverNode());
    await task.setPower("reboot");
    return;
  }
  await task.setPower("power off");
  await task.hw.boot.cleanUpRamdisk(await task.driverNode());
}

/**
 * Best effort for failure paths: never leave a node running a half-done job unseen. A node with
 * `disable_power_off` keeps its power (Ironic leaves a node whose cleaning failed as it is) and only loses
 * its ramdisk boot files.
 */
export async function powerOffQuietly(task: Task): Promise<void> {
  try {
    // NOTE: not cancellable: the task may have been aborted, and that is when the node must go off
    if (!powerOffDisabled(task.node)) await applyPower(task, "power off", { cancellable: false });
    await task.hw.boot.cleanUpRamdisk(await task.driverNode());
  } catch (error) {
    task.log.warn({ err: error }, "could not power off after a failure");
  }
}
