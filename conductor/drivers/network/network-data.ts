import type { JsonObject, PortRecord, PortgroupRecord } from "../../../shared/resources.ts";
import { vifOf } from "./vif.ts";

/** One entry of network_data.json's `links` (the OpenStack metadata layout cloud-init reads). */
interface Link {
  id: string;
  type: "vif" | "phy" | "bond";
  ethernet_mac_address: string;
  vif_id?: string;
  bond_links?: string[];
  bond_mode?: string;
}

/** One entry of `networks`: DHCP on a link (without Neutron the conductor knows no fixed address). */
interface Network {
  id: string;
  type: "ipv4_dhcp";
  link: string;
  network_id: string;
}

/**
 * network_data.json for a node's attached VIFs, in the shape Ironic's neutron interface gives it
 * (get_neutron_port_data): a `vif` link per port holding a VIF, named by the port's UUID and carrying its
 * MAC and `vif_id`; a port group holding one becomes a `bond` link over `phy` links for its member ports.
 * Each VIF's link gets a DHCP network, since no Neutron tells its addresses. Null when no VIF is attached.
 * Pure.
 */
export function vifNetworkData(
  ports: readonly PortRecord[],
  portgroups: readonly PortgroupRecord[],
): JsonObject | null {
  const links: Link[] = [];
  const networks: Network[] = [];
  const addNetwork = (link: string, vif: string): void => {
    networks.push({ id: `network${networks.length}`, type: "ipv4_dhcp", link, network_id: vif });
  };
  const bonded = new Set<string>();
  for (const group of portgroups) {
    const vif = vifOf(group);
    if (vif === null) continue;
    const members = ports.filter((port) => port.portgroup_uuid === group.uuid);
    const [first] = members;
    // a group with no member port has no wire to the machine
    if (first === undefined) continue;
    const address = group.address ?? first.address;
    for (const port of members) {
      bonded.add(port.uuid);
      links.push({ id: port.uuid, type: "phy", ethernet_mac_address: port.address });
    }
    links.push({
      id: group.uuid,
      type: "bond",
      ethernet_mac_address: address,
      vif_id: vif,
      bond_links: members.map((port) => port.uuid),
      ...(group.mode ? { bond_mode: group.mode } : {}),
    });
    addNetwork(group.uuid, vif);
  }
  for (const port of ports) {
    const vif = vifOf(port);
    if (vif === null || bonded.has(port.uuid)) continue;
    links.push({ id: port.uuid, type: "vif", ethernet_mac_address: port.address, vif_id: vif });
    addNetwork(port.uuid, vif);
  }
  if (networks.length === 0) return null;
  return { links, networks, services: [] };
}
