import type { NodeRecord } from "../../shared/resources.ts";
import { Conflict, Forbidden } from "../errors.ts";
import { TRANSIENT_STATES, WAIT_STATES } from "../states/machine.ts";
import { NodeLocked } from "../db/store.ts";
import { defineOperation, nodeWhenFree, underLock, type OperationContext } from "./operation.ts";

/** DELETE /v1/nodes/{id} (Ironic's destroy_node). */
export const DELETE_NODE = defineOperation({ purpose: "node deletion", shared: false, onOwner: true });

const DELETABLE_STATES = new Set(["enroll", "manageable", "available", "adopt failed"]);

/** Ironic's rules for deleting a node, in its order. @throws Conflict (409), Forbidden (protected, 403) */
function checkDeletable(node: NodeRecord, options: { unlocked: boolean }): void {
  if (node.instance_uuid)
    throw new Conflict(`Node ${node.uuid} is associated with instance ${node.instance_uuid}.`);
  if (options.unlocked && node.reservation !== null) {
    throw new Conflict(
      `Node ${node.uuid} is locked by host ${node.reservation}, please retry after the current operation is completed.`,
    );
  }
  if (node.protected) throw new Forbidden(`Node ${node.uuid} is protected and cannot be deleted.`);
  const busy = TRANSIENT_STATES.includes(node.provision_state) || WAIT_STATES.includes(node.provision_state);
  if (
    !DELETABLE_STATES.has(node.provision_state) &&
    !(node.maintenance && !busy && node.provision_state !== "active")
  ) {
    throw new Conflict(
      `Can not delete node "${node.uuid}" while it is in provision state "${node.provision_state}". Valid provision states to start deletion are: ${[...DELETABLE_STATES].join(", ")}, or any stable state in maintenance`,
    );
  }
}

/**
 * Deletes a node under its exclusive lock: the rules are checked on the node as read (the client's answer
 * keeps Ironic's order) and again on the locked node, its boot files removed (they must not outlive it),
 * then the row. @throws Conflict, Forbidden, NodeLocked (409)
 */
export async function deleteNode(ctx: OperationContext, read: NodeRecord): Promise<void> {
  const node = read.reservation === null ? read : await whenFree(ctx, read);
  checkDeletable(node, { unlocked: true });
  if (!ctx.drivers.get(node.driver)) await deleteDriverless(ctx, node);
  else
    await underLock(ctx, node, {
      spec: DELETE_NODE,
      body: async (task) => {
        checkDeletable(task.node, { unlocked: false });
        await task.hw.boot.cleanUpRamdisk(await task.driverNode()).catch(() => undefined);
        await ctx.deps.store.deleteNode(task.node.uuid);
      },
    });
  ctx.deps.publish({ type: "deleted", node: node.uuid });
}

/**
 * The node as its holder left it, once that lets go (a lock being released is waited out, as for every
 * request); as read when it stays locked or is gone, so the checks answer in their order.
 */
async function whenFree(ctx: OperationContext, read: NodeRecord): Promise<NodeRecord> {
  try {
    return (await nodeWhenFree(ctx, read.uuid)) ?? read;
  } catch (error) {
    if (error instanceof NodeLocked) return read;
    throw error;
  }
}

/** A node whose driver no conductor here offers has no boot files here: reserved, checked and deleted. */
async function deleteDriverless(ctx: OperationContext, node: NodeRecord): Promise<void> {
  const { store, holder } = ctx.deps;
  const reserved = await store.reserveNode(node.uuid, holder);
  try {
    checkDeletable(reserved, { unlocked: false });
    await store.deleteNode(node.uuid);
  } catch (error) {
    await store.releaseNode(node.uuid, holder);
    throw error;
  }
}
