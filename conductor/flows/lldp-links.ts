import type { Inventory } from "../../shared/inventory.ts";
import {
  LldpRawSchema,
  type ParsedLldp,
  type RawTlv,
  localLinkFromLldp,
  parseLldp,
} from "../../shared/lldp.ts";
import type { JsonObject } from "../../shared/resources.ts";
import type { Task } from "../tasks/task.ts";

/**
 * Ironic's parse-lldp and local-link-connection inspection hooks: each interface's LLDP TLVs (plugin_data
 * `lldp_raw`, else the inventory's deprecated per-interface `lldp`) are parsed into plugin_data
 * `parsed_lldp[iface]`, and the node's port with that MAC gets the switch_id, port_id and switch_info the
 * frame names, for each key its local_link_connection does not have yet (an operator's value stays). An
 * unreadable `lldp_raw` is ignored with a warning, as a malformed TLV is: LLDP never fails an inspection.
 * @returns the plugin data with `parsed_lldp` added when any interface had TLVs
 */
export async function applyLldp(
  task: Task,
  inventory: Inventory,
  pluginData: JsonObject,
): Promise<JsonObject> {
  const raw = LldpRawSchema.safeParse(pluginData.lldp_raw ?? {});
  if (!raw.success) task.log.warn({ error: raw.error.message.slice(0, 300) }, "ignoring malformed lldp_raw");
  const lldpRaw = raw.success ? raw.data : {};
  const parsed: Record<string, ParsedLldp> = {};
  const { store } = task.deps;
  const ports = await store.listPorts({ node_uuid: task.node.uuid }, {});
  for (const iface of inventory.interfaces) {
    const tlvs: readonly RawTlv[] | null = lldpRaw[iface.name] ?? iface.lldp;
    if (tlvs === null || tlvs === undefined || tlvs.length === 0) continue;
    parsed[iface.name] = parseLldp(tlvs);
    const port = ports.find((item) => item.address === iface.mac_address.toLowerCase());
    if (port === undefined) continue;
    const missing = localLinkFromLldp(tlvs, port.local_link_connection);
    if (Object.keys(missing).length === 0) continue;
    await store.updatePort(port.uuid, {
      local_link_connection: { ...port.local_link_connection, ...missing },
    });
    task.log.info({ port: port.uuid, iface: iface.name, ...missing }, "local_link_connection from LLDP");
  }
  if (Object.keys(parsed).length === 0) return pluginData;
  return { ...pluginData, parsed_lldp: parsed as unknown as JsonObject };
}
