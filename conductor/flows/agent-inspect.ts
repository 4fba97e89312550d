import { randomUUID } from "node:crypto";
import { InventorySchema } from "../../shared/inventory.ts";
import type { Task } from "../tasks/task.ts";
import { DONE, WAIT, type Flow, type FlowOutcome } from "./flow.ts";
import { propertiesFromInventory, pxeMac } from "./inspection-results.ts";
import { bootIntoRamdisk, canFastTrack, leaveRamdisk, powerOffQuietly } from "./ramdisk.ts";

async function collect(task: Task): Promise<FlowOutcome> {
  const raw = await task.deps.agents.call(
    task.node.uuid,
    { name: "get_inventory", args: {} },
    { signal: task.signal, timeoutMs: 120_000 },
  );
  const inventory = InventorySchema.parse(raw);
  const { store } = task.deps;
  await store.saveInventory(task.node.uuid, { inventory, plugin_data: {} });
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
