import type { RaidConfig } from "../../shared/raid.ts";
import type { NodeRecord } from "../../shared/resources.ts";
import { nodeInterfaces } from "../drivers/hardware-type.ts";
import { Invalid, NotFound } from "../errors.ts";
import { defineOperation, underLock, type OperationContext } from "./operation.ts";

/** PUT /v1/nodes/{id}/states/raid (Ironic's set_target_raid_config). */
export const SET_RAID_CONFIG = defineOperation({ purpose: "raid", shared: false, onOwner: true });

/**
 * Records target_raid_config (already checked against Ironic's schema) after the node's raid interface
 * accepted it; null clears it. @throws NotFound (no raid interface), Invalid, NodeLocked
 */
export async function setTargetRaidConfig(
  ctx: OperationContext,
  node: NodeRecord,
  config: RaidConfig | null,
): Promise<void> {
  const hw = ctx.drivers.get(node.driver);
  if (!hw) throw new Invalid(`No conductor service registered which supports driver ${node.driver}.`);
  const raid = nodeInterfaces(hw, node).raid;
  if (!raid.supported) {
    throw new NotFound(`Driver ${node.driver} does not support raid (disabled or not implemented).`);
  }
  if (config) raid.validateRaidConfig(config);
  await underLock(ctx, node, {
    spec: SET_RAID_CONFIG,
    body: async (task) => {
      await task.update({ target_raid_config: config ?? {} });
    },
  });
}
