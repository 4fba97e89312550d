import type { Inventory } from "../../shared/inventory.ts";
import { type JsonObject, newPortRecord } from "../../shared/resources.ts";
import type { Task } from "../tasks/task.ts";
import { applyRules } from "./apply-rules.ts";
import { propertiesFromInventory, pxeMac } from "./inspection-results.ts";
import { applyLldp } from "./lldp-links.ts";

/**
 * Stores an inventory (whoever read it: the agent or the BMC), creates a port for each MAC no port has yet,
 * fills in the node's properties and the ports' local_link_connection from LLDP, as Ironic's inspection does
 * (its parse-lldp and local-link-connection hooks included), then applies the inspection rules (which may
 * fail the inspection). The data is stored after the rules, which may change the plugin data.
 */
export async function recordInventory(
  task: Task,
  inventory: Inventory,
  pluginData: JsonObject = {},
): Promise<void> {
  const { store } = task.deps;
  const bootMac = pxeMac(inventory);
  const known = new Set((await store.listPorts({ node_uuid: task.node.uuid }, {})).map((p) => p.address));
  for (const iface of inventory.interfaces) {
    const address = iface.mac_address.toLowerCase();
    if (known.has(address) || (await store.listPorts({ address }, {})).length > 0) continue;
    known.add(address);
    await store.createPort(
      newPortRecord({
        address,
        node_uuid: task.node.uuid,
        pxe_enabled: bootMac === null ? true : address === bootMac,
      }),
    );
  }
  await task.update({ properties: propertiesFromInventory(inventory, task.node.properties) });
  const withLldp = await applyLldp(task, inventory, pluginData);
  const processed = await applyRules(task, inventory, withLldp);
  await store.saveInventory(task.node.uuid, { inventory, plugin_data: processed });
  await task.update({ inspection_finished_at: new Date().toISOString() });
}
