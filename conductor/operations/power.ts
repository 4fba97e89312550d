import type { NodeRecord } from "../../shared/resources.ts";
import type { PowerState, PowerTarget } from "../../shared/states.ts";
import { NodeLocked, NodeNotFound } from "../db/store.ts";
import { retireAgentToken } from "../drivers/agent-token.ts";
import { STABLE_STATES } from "../states/machine.ts";
import { applyPower, PowerOffDisabled, powerOffDisabled, powerStateAfter } from "../tasks/power.ts";
import { defineOperation, hardwareOf, underLock, type OperationContext } from "./operation.ts";

/** PUT /v1/nodes/{id}/states/power (Ironic's change_node_power_state). */
export const CHANGE_POWER = defineOperation({ purpose: "power", shared: false, onOwner: true });

/** The power sync's correction of a node switched behind the conductor's back. */
export const SYNC_POWER = defineOperation({
  purpose: "power sync",
  shared: false,
  onOwner: true,
  sweep: true,
});

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * An operator's power action: target_power_state recorded now (202), the BMC in the background under the same
 * lock. An operator's power off or reboot ends the ramdisk's boot (as Ironic's power action), so the agent that
 * comes up next may be issued a new token, and the old agent's session is retired at once. A BMC failure lands in last_error. A power off of a node with
 * `disable_power_off` is refused at once, as Ironic's API does (applyPower refuses it again under the lock).
 * @throws Invalid (unknown driver), PowerOffDisabled (409), NodeLocked (409)
 */
export async function changePower(
  ctx: OperationContext,
  node: NodeRecord,
  target: PowerTarget,
): Promise<void> {
  hardwareOf(ctx.drivers, node.driver);
  if (powerStateAfter(target) === "power off" && powerOffDisabled(node)) throw new PowerOffDisabled(target);
  await underLock(ctx, node, {
    spec: CHANGE_POWER,
    body: async (task, lock) => {
      await task.update({ target_power_state: target, last_error: null });
      lock.spawnAfter(async (t) => {
        try {
          if (target !== "power on") await retireAgentToken(t);
          const reached = await applyPower(t, target);
          // the ramdisk's boot is over: its agent's session goes now, not when its heartbeat times out, so a
          // fast-track deploy right after never sends work to the dead agent (Ironic wipes agent_url here)
          if (target !== "power on") t.deps.agents.retire?.(t.node.uuid);
          ctx.deps.publish({ type: "power", node: t.node.uuid, power_state: reached });
        } catch (error) {
          const message = `Failed to change power state to '${target}': ${errorMessage(error)}`;
          await t.update({ target_power_state: null, last_error: message });
          ctx.deps.publish({
            type: "power",
            node: t.node.uuid,
            power_state: t.node.power_state,
            error: message,
          });
        }
      });
    },
  });
}

/** What a sync correction did: switched the node, or left it (reserved, or changed since the sync read it). */
export type SyncPowerOutcome = "set" | "skipped";

/**
 * The power sync's write (Ironic's _sync_power_state_nodes_task with force_power_state_during_sync): under the
 * node's exclusive lock, back to the recorded state, and only while the node is still as the sync read it:
 * unreserved, out of maintenance, in a stable state, no power change pending, `recorded` still recorded. A node reserved by anyone
 * (another conductor's deploy, an operator's reboot here) is skipped this pass, never written, and so is a
 * node with `disable_power_off`, which Ironic's sync never switches (its recorded state follows the BMC).
 * @throws DriverError (the BMC)
 */
export async function syncPower(
  ctx: OperationContext,
  uuid: string,
  recorded: PowerState,
): Promise<SyncPowerOutcome> {
  const node = await ctx.deps.store.getNode(uuid);
  if (!node || !stillSyncable(node, recorded)) return "skipped";
  try {
    return await underLock(ctx, node, {
      spec: SYNC_POWER,
      body: async (task) => {
        if (!stillSyncable(task.node, recorded)) return "skipped";
        await applyPower(task, recorded);
        return "set";
      },
    });
  } catch (error) {
    if (error instanceof NodeLocked || error instanceof NodeNotFound) return "skipped";
    throw error;
  }
}

function stillSyncable(node: NodeRecord, expected: PowerState): boolean {
  return (
    !node.maintenance &&
    !powerOffDisabled(node) &&
    STABLE_STATES.includes(node.provision_state) &&
    node.target_power_state === null &&
    node.power_state === expected
  );
}
