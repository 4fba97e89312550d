import type { NodeRecord } from "../../shared/resources.ts";
import type { Store } from "../db/store.ts";
import type { DriverNode } from "./out-of-band.ts";

/** A node snapshot for driver calls, with its ports. */
export async function driverNodeOf(store: Store, node: NodeRecord): Promise<DriverNode> {
  const ports = await store.listPorts({ node_uuid: node.uuid }, {});
  return {
    uuid: node.uuid,
    name: node.name,
    driver_info: node.driver_info,
    properties: node.properties,
    instance_info: node.instance_info,
    driver_internal_info: node.driver_internal_info,
    boot_mode: node.boot_mode,
    boot_interface: node.boot_interface,
    network_data: node.network_data,
    disable_power_off: node.disable_power_off === true,
    power_state: node.power_state,
    ports: ports.map((p) => ({ address: p.address, pxe_enabled: p.pxe_enabled })),
  };
}
