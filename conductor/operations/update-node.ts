import { checkNodeNetworkData, chooseInterfaces } from "./node-record.ts";
import type { NodeRecord } from "../../shared/resources.ts";
import type { HardwareType } from "../drivers/hardware-type.ts";
import { Conflict, Invalid } from "../errors.ts";
import { defineOperation, hardwareOf, underRecordLock, type OperationContext } from "./operation.ts";

/** PATCH /v1/nodes/{id} and the traits routes (Ironic's update_node). */
export const UPDATE_NODE = defineOperation({ purpose: "node update", shared: false, onOwner: true });

/** PUT/DELETE /v1/nodes/{id}/maintenance (Ironic's update_node through the maintenance endpoint). */
export const SET_MAINTENANCE = defineOperation({ purpose: "maintenance", shared: false, onOwner: true });

/** Fields an operator may change with PATCH; the rest belong to the conductor. */
export const WRITABLE_FIELDS: ReadonlySet<string> = new Set([
  "name",
  "driver",
  "driver_info",
  "properties",
  "instance_info",
  "instance_uuid",
  "instance_name",
  "extra",
  "resource_class",
  "conductor_group",
  "chassis_uuid",
  "description",
  "owner",
  "lessee",
  "automated_clean",
  "protected",
  "protected_reason",
  "retired",
  "retired_reason",
  "network_data",
  "maintenance",
  "maintenance_reason",
  "shard",
  "parent_node",
  "disable_power_off",
  "boot_mode",
  "bios_interface",
  "boot_interface",
  "console_interface",
  "deploy_interface",
  "firmware_interface",
  "inspect_interface",
  "management_interface",
  "network_interface",
  "power_interface",
  "raid_interface",
  "rescue_interface",
  "storage_interface",
  "vendor_interface",
]);

/** Object fields a top-level `remove` resets to {} rather than null; the only ones with patchable sub-keys. */
export const OBJECT_FIELDS = ["driver_info", "properties", "instance_info", "extra", "network_data"] as const;

/**
 * Changes a node's record under its exclusive lock. `changesOf` computes the fields to write from the locked
 * node (a JSON Patch applied by the API); a new driver brings its default interfaces; an instance is never
 * swapped for another. Returns the node as written. @throws NodeLocked (409), Conflict, Invalid, what
 * `changesOf` throws
 */
export async function updateNode(
  ctx: OperationContext,
  node: NodeRecord,
  request: {
    changesOf: (current: NodeRecord) => Partial<NodeRecord>;
    /** ?reset_interfaces=true: a new driver's defaults for the interfaces the change does not name */
    resetInterfaces?: boolean;
  },
): Promise<{ node: NodeRecord; fields: string[] }> {
  const result = await underRecordLock(ctx, node, {
    spec: UPDATE_NODE,
    body: async (task) => {
      const changes = request.changesOf(task.node);
      if (changes.driver !== undefined) {
        const hw = hardwareOf(ctx.drivers, changes.driver, task.node.conductor_group);
        Object.assign(
          changes,
          interfacesForDriver(hw, task.node, { changes, reset: request.resetInterfaces === true }),
        );
      } else if (Object.keys(changes).some((key) => key.endsWith("_interface"))) {
        // an interface the hardware type does not offer (storage_interface "cinder") is refused, as on create
        chooseInterfaces(hardwareOf(ctx.drivers, task.node.driver, task.node.conductor_group), changes);
      }
      if (
        changes.instance_uuid !== undefined &&
        task.node.instance_uuid !== null &&
        changes.instance_uuid !== null
      ) {
        throw new Conflict(`Node ${task.node.uuid} is associated with instance ${task.node.instance_uuid}.`);
      }
      checkRetired(task.node, changes);
      if (changes.network_data !== undefined) checkNodeNetworkData(changes.network_data);
      const fields = Object.keys(changes);
      return { node: fields.length ? await task.update(changes) : task.node, fields };
    },
  });
  ctx.deps.publish({ type: "updated", node: node.uuid, fields: result.fields });
  return result;
}

/**
 * The interfaces a node gets with a new hardware type, as Ironic's update_node: an interface the same change
 * names is kept; the others keep the node's current value, or with `reset` (?reset_interfaces=true, 1.45)
 * take the new type's default. A kept value the new type does not offer is Ironic's IncompatibleInterface.
 * @throws Invalid
 */
function interfacesForDriver(
  hw: HardwareType,
  node: NodeRecord,
  { changes, reset }: { changes: Partial<NodeRecord>; reset: boolean },
): HardwareType["interfaces"] {
  const chosen = { ...hw.interfaces };
  for (const key of Object.keys(chosen) as (keyof HardwareType["interfaces"])[]) {
    const named = changes[key];
    const wanted = named ?? (reset ? undefined : node[key]);
    if (wanted === undefined || wanted === null || wanted === chosen[key]) continue;
    if (!hw.alternatives[key]?.includes(wanted)) {
      const kind = key.replace(/_interface$/, "");
      throw new Invalid(
        `${kind} interface implementation '${wanted}' is not supported by hardware type ${hw.name}.`,
      );
    }
    chosen[key] = wanted;
  }
  return chosen;
}

/** Ironic's _check_update_retired: an available node is not retired; un-retiring clears the reason. */
function checkRetired(node: NodeRecord, changes: Partial<NodeRecord>): void {
  if (changes.retired === undefined || changes.retired === node.retired) return;
  if (!changes.retired) changes.retired_reason = null;
  else if (node.provision_state === "available")
    throw new Conflict(
      `Node ${node.uuid} can not have 'retired' set in provision state 'available', the current state is '${node.provision_state}'`,
    );
}

/** Sets or clears maintenance (a clear also clears the fault). @throws NodeLocked (409) */
export async function setMaintenance(
  ctx: OperationContext,
  node: NodeRecord,
  change: { on: boolean; reason: string | null },
): Promise<void> {
  const { on, reason } = change;
  await underRecordLock(ctx, node, {
    spec: SET_MAINTENANCE,
    body: (task) =>
      task.update({
        maintenance: on,
        maintenance_reason: on ? reason : null,
        fault: on ? task.node.fault : null,
      }),
  });
  ctx.deps.publish({ type: "maintenance", node: node.uuid, maintenance: on });
}

/** Replaces a node's traits with what `change` makes of them. @throws NodeLocked (409) */
export async function setTraits(
  ctx: OperationContext,
  node: NodeRecord,
  change: (traits: string[]) => string[],
): Promise<void> {
  await underRecordLock(ctx, node, {
    spec: UPDATE_NODE,
    body: (task) => task.update({ traits: change(task.node.traits) }),
  });
}
