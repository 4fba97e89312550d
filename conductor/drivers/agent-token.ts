import type { DriverTask } from "./task-context.ts";

/**
 * Ends the agent token of the node's current boot (the conductor is about to boot it again, or an operator
 * powers it off): the first hello of the next boot gets a new token. The old boot's id is kept (or `bootId`,
 * a newer boot the conductor knows of and is about to end), so its agent, still alive until the power cycle
 * lands, cannot take the new boot's token by dialling without one.
 */
export async function retireAgentToken(task: DriverTask, options: { bootId?: string } = {}): Promise<void> {
  const { store } = task.deps;
  const old = await store.getAgentToken(task.node.uuid);
  const retired = options.bootId ?? old?.bootId;
  if (retired !== undefined) {
    await task.mergeInternalInfo({ agent_retired_boot_id: retired });
  }
  await store.setAgentToken(task.node.uuid, null);
}
