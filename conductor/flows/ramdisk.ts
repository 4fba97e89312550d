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
 * Boots the node into the deploy ramdisk: boot files, one-time PXE, power cycle. The previous boot's agent
 * token is dropped so the new agent gets a fresh one.
 */
export async function bootIntoRamdisk(task: Task): Promise<void> {
  const { store } = task.deps;
  await store.setAgentToken(task.node.uuid, null);
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
