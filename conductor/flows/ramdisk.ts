import type { Task } from "../tasks/task.ts";

/** The WebSocket URL agents dial, from the conductor's public URL. */
function agentUrl(publicUrl: string): string {
  return `${publicUrl.replace(/^http/, "ws")}/v1/agent`;
}

/** True when the node's agent is still connected from earlier work and fast track may skip a reboot. */
export function canFastTrack(task: Task): boolean {
  return task.deps.config.agent.fastTrack && task.deps.agents.isConnected(task.node.uuid);
}

/**
 * Ends the agent token of the node's current boot (the conductor is about to boot it again, or an operator
 * powers it off): the first hello of the next boot gets a new token. The old boot's id is kept, so its agent,
 * still alive until the power cycle lands, cannot take the new boot's token by dialling without one.
 */
export async function retireAgentToken(task: Task): Promise<void> {
  const { store } = task.deps;
  const old = await store.getAgentToken(task.node.uuid);
  if (old !== null) {
    await task.update({
      driver_internal_info: { ...task.node.driver_internal_info, agent_retired_boot_id: old.bootId },
    });
  }
  await store.setAgentToken(task.node.uuid, null);
}

/**
 * Boots the node into the deploy ramdisk: boot files, one-time PXE, power cycle. The previous boot's agent
 * token is retired (the only other place is an operator's power action) so the new agent gets a fresh one.
 */
export async function bootIntoRamdisk(task: Task): Promise<void> {
  await retireAgentToken(task);
  const node = await task.driverNode();
  const conductor = agentUrl(task.deps.publicUrl());
  const pin = task.deps.caFingerprint;
  await task.hw.boot.prepareRamdisk(node, {
    agentParams: { "anvil.conductor": conductor, ...(pin ? { "anvil.ca_fingerprint": pin } : {}) },
  });
  await task.hw.management.setBootDevice(node, { device: "pxe", persistent: false }, { signal: task.signal });
  await task.setPower(task.node.power_state === "power on" ? "reboot" : "power on");
  await task.update({
    driver_internal_info: { ...task.node.driver_internal_info, ramdisk_booted_at: new Date().toISOString() },
  });
}

/** After in-band work: power off and remove boot files, unless fast track keeps the agent for the next job. */
export async function leaveRamdisk(task: Task): Promise<void> {
  if (task.deps.config.agent.fastTrack) return;
  await task.setPower("power off");
  await task.hw.boot.cleanUpRamdisk(await task.driverNode());
}

/** Best effort for failure paths: never leave a node running a half-done job unseen. */
export async function powerOffQuietly(task: Task): Promise<void> {
  try {
    const node = await task.driverNode();
    await task.hw.power.setPowerState(node, "power off");
    await task.update({ power_state: "power off" });
    await task.hw.boot.cleanUpRamdisk(node);
  } catch (error) {
    task.log.warn({ err: error }, "could not power off after a failure");
  }
}
