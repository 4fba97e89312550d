import { randomUUID } from "node:crypto";
import { type Inventory, InventorySchema } from "../../shared/inventory.ts";
import type { Task } from "../tasks/task.ts";
import { DONE, WAIT, type Flow, type FlowOutcome } from "./flow.ts";
import { propertiesFromInventory, pxeMac } from "./inspection-results.ts";
import { bootIntoRamdisk, canFastTrack, leaveRamdisk, powerOffQuietly } from "./ramdisk.ts";

/**
 * driver_internal_info flag: a ramdisk posted this inspection's data (Ironic's continue_inspection, 1.84) and
 * it waits in the store, so the agent is not asked for it.
 */
export const POSTED_INSPECTION_DATA = "inspection_data_posted";

/** The inventory a ramdisk posted, read back from the store. @throws when it is missing or malformed */
async function postedInventory(task: Task): Promise<Inventory> {
  const saved = (await task.deps.store.getInventory(task.node.uuid)) as { inventory?: unknown } | null;
  return InventorySchema.parse(saved?.inventory);
}

async function collect(task: Task): Promise<FlowOutcome> {
  const { store } = task.deps;
  const { [POSTED_INSPECTION_DATA]: posted, ...internal } = task.node.driver_internal_info;
  let inventory: Inventory;
  if (posted === true) {
    inventory = await postedInventory(task);
    await task.update({ driver_internal_info: internal });
  } else {
    const raw = await task.deps.agents.call(
      task.node.uuid,
      { name: "get_inventory", args: {} },
      { signal: task.signal, timeoutMs: 120_000 },
    );
    inventory = InventorySchema.parse(raw);
    await store.saveInventory(task.node.uuid, { inventory, plugin_data: {} });
  }
  const bootMac = pxeMac(inventory);
  const known = new Set((await store.listPorts({ node_uuid: task.node.uuid }, {})).map((p) => p.address));
  for (const iface of inventory.interfaces) {
    const address = iface.mac_address.toLowerCase();
    if (known.has(address) || (await store.listPorts({ address }, {})).length > 0) continue;
    await store.createPort({
      uuid: randomUUID(),
      address,
      node_uuid: task.node.uuid,
      portgroup_uuid: null,
      pxe_enabled: bootMac === null ? true : address === bootMac,
      physical_network: null,
      local_link_connection: {},
      internal_info: {},
      extra: {},
      is_smartnic: false,
      name: null,
      created_at: new Date().toISOString(),
      updated_at: null,
    });
  }
  await task.update({
    properties: propertiesFromInventory(inventory, task.node.properties),
    inspection_finished_at: new Date().toISOString(),
  });
  await leaveRamdisk(task);
  return DONE;
}

/** In-band inspection: boot the ramdisk, take the agent's inventory, fill in properties and ports. */
export const agentInspect: Flow = {
  async start(task) {
    await task.update({ inspection_started_at: new Date().toISOString(), inspection_finished_at: null });
    if (canFastTrack(task)) return collect(task);
    await bootIntoRamdisk(task);
    return WAIT;
  },
  resume: collect,
  onFail: powerOffQuietly,
};
