import type { NodeRecord } from "../../shared/resources.ts";
import { Invalid } from "../errors.ts";
import { defineOperation, underLock, type OperationContext } from "./operation.ts";

/**
 * Changing a node's volume connectors or targets (Ironic's update/destroy_volume_*): a record write, no
 * hardware, so it runs wherever it lands, but under the node's exclusive lock like every node write.
 */
export const CHANGE_VOLUME = defineOperation({ purpose: "volume change", shared: false, onOwner: false });

/** Deleting is also allowed, whatever the power, in these states (Ironic's conductor). */
const DELETE_ALLOWED_STATES = new Set(["enroll", "manageable", "adopt failed"]);

/**
 * Runs `write` under the node's lock once Ironic's rule holds on the locked node: powered off (deletion also in
 * enroll, manageable, adopt failed). @throws NodeLocked (409, Ironic's text), Invalid (400)
 */
export async function changeVolume<T>(
  ctx: OperationContext,
  node: NodeRecord,
  change: { action: string; deleting: boolean; write: () => Promise<T> },
): Promise<T> {
  return underLock(ctx, node, {
    spec: CHANGE_VOLUME,
    body: async (task) => {
      const locked = task.node;
      if (
        !(change.deleting && DELETE_ALLOWED_STATES.has(locked.provision_state)) &&
        locked.power_state !== "power off"
      ) {
        throw new Invalid(
          `The requested action "${change.action}" can not be performed on node "${locked.uuid}" while it is in state "${String(locked.power_state)}".`,
        );
      }
      return change.write();
    },
  });
}
