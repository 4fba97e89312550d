import type { NodeRecord } from "../../shared/resources.ts";
import { Conflict, Invalid } from "../errors.ts";
import { TRANSIENT_STATES, WAIT_STATES } from "../states/machine.ts";
import { defineOperation, hardwareOf, underLock, type OperationContext } from "./operation.ts";

/** PUT /v1/nodes/{id}/states/boot_mode (Ironic's change_node_boot_mode, 1.76). */
export const SET_BOOT_MODE = defineOperation({
  purpose: "changing node boot mode",
  shared: false,
  onOwner: true,
});

/** PUT /v1/nodes/{id}/states/secure_boot (Ironic's change_node_secure_boot, 1.76). */
export const SET_SECURE_BOOT = defineOperation({
  purpose: "changing node secure",
  shared: false,
  onOwner: true,
});

type Change = { kind: "boot_mode"; value: "bios" | "uefi" } | { kind: "secure_boot"; value: boolean };

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Ironic's node_change_boot_mode / node_change_secure_boot: refused (409) while the node is transitioning;
 * a driver without the setter is Ironic's UnsupportedDriverExtension (400, answered before anything changes:
 * the driver is known without asking the BMC); otherwise 202 with the change made in the background under the
 * lock, recorded on the node when it worked and in last_error when it did not (Ironic's texts).
 * @throws Invalid (unknown driver, unsupported), Conflict (transitioning), NodeLocked (409)
 */
export async function changeBootSetting(
  ctx: OperationContext,
  node: NodeRecord,
  change: Change,
): Promise<void> {
  const hw = hardwareOf(ctx.drivers, node.driver);
  const extension = change.kind === "boot_mode" ? "set_boot_mode" : "set_secure_boot_state";
  const setter = change.kind === "boot_mode" ? hw.management.setBootMode : hw.management.setSecureBoot;
  if (setter === undefined)
    throw new Invalid(`Driver ${node.driver} does not support ${extension} (disabled or not implemented).`);
  await underLock(ctx, node, {
    spec: change.kind === "boot_mode" ? SET_BOOT_MODE : SET_SECURE_BOOT,
    body: async (task, lock) => {
      const state = task.node.provision_state;
      if (TRANSIENT_STATES.includes(state) || WAIT_STATES.includes(state))
        throw new Conflict(
          `Node is in ${state} state. Since node is transitioning, the boot mode will not be set as this may interfere with ongoing changes and result in erroneous modification. Try again later.`,
        );
      await task.update({ last_error: null });
      lock.spawnAfter(async (t) => {
        try {
          const target = await t.driverNode();
          if (change.kind === "boot_mode") {
            if (t.node.boot_mode !== change.value)
              await t.hw.management.setBootMode?.(target, change.value, { signal: t.signal });
            await t.update({ boot_mode: change.value });
          } else {
            if (t.node.secure_boot !== change.value)
              await t.hw.management.setSecureBoot?.(target, change.value, { signal: t.signal });
            await t.update({ secure_boot: change.value });
          }
          ctx.deps.publish({ type: "updated", node: t.node.uuid, fields: [change.kind] });
        } catch (error) {
          const message =
            change.kind === "boot_mode"
              ? `Failed to change boot mode to '${change.value}: ${errorMessage(error)}`
              : `Failed to change secure_boot state to '${change.value ? "True" : "False"}': ${errorMessage(error)}`;
          await t.update({ last_error: message });
        }
      });
    },
  });
}
