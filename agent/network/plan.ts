import { isIP, isIPv4 } from "node:net";
import { prefixLength, staticPrefix } from "../../shared/network-data.ts";
import type { NetworkData, NetworkDataLink, NetworkDataNetwork } from "../../shared/network-data.ts";

/** An ethernet link of this machine. */
export interface MachineLink {
  name: string;
  /** Lower case, colon separated. */
  mac: string;
}

/** One thing to do: run `ip` with these arguments, write a (proc/sys) file, or start the DHCP client. */
export type NetStep =
  | {
      kind: "ip";
      args: string[];
      /** When `args` creates a device that already exists: these instead (e.g. `ip link set … type bond …`). */
      ifExists?: string[];
    }
  | { kind: "write"; path: string; content: string }
  | { kind: "dhcp4"; link: string; argv: string[] };

export interface NetPlan {
  steps: NetStep[];
  /** Link id → the interface name it got here. */
  names: Map<string, string>;
  /** Things the data asks for that the ramdisk does not do; the rest of the plan still applies. */
  warnings: string[];
}

export interface PlanOptions {
  /** Where `/etc/resolv.conf` is written. */
  resolvConf: string;
  /** Root of the sysctl tree (`/proc/sys`). */
  procSys: string;
  /** The udhcpc hook script the ramdisk's DHCP path uses. */
  dhcpScript: string;
}

/** The data cannot be applied to this machine (a link that is not here, an unsupported layout). */
export class NetPlanError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "NetPlanError";
  }
}

const IFNAMSIZ = 15;
/** Without bond_miimon the kernel would not watch the members' carrier at all; glean's default too. */
const DEFAULT_MIIMON = 100;
/** Default routes of later networks get higher metrics, so two never replace each other. */
const ROUTE_METRIC_BASE = 10;

/**
 * The ordered steps that configure this machine from network_data: physical links found by MAC (as glean
 * does), bonds over them, VLANs over either, then each network's addresses and routes, DHCP/SLAAC where a
 * network asks for it, and resolv.conf. Each device is created, tuned (sysctls, MTU, MAC) and only then set
 * up, so that router solicitations go out with the settings in place. Pure.
 * @throws NetPlanError naming the link that is not on this machine or cannot be built
 */
export function planNetwork(
  data: NetworkData,
  machine: readonly MachineLink[],
  options: PlanOptions,
): NetPlan {
  const steps: NetStep[] = [{ kind: "ip", args: ["link", "set", "dev", "lo", "up"] }];
  const warnings: string[] = [];
  const names = nameLinks(data.links, machine);
  const sysctls = ipv6Sysctls(data.networks, names, warnings);
  const bonded = new Set(data.links.flatMap((link) => (link.type === "bond" ? (link.bond_links ?? []) : [])));
  const tune = (link: NetworkDataLink, name: string, mac: string | undefined): void => {
    for (const [key, value] of sysctls.get(name) ?? [])
      steps.push({
        kind: "write",
        path: `${options.procSys}/net/ipv6/conf/${name}/${key}`,
        content: `${value}\n`,
      });
    if (mac !== undefined) steps.push({ kind: "ip", args: ["link", "set", "dev", name, "address", mac] });
    if (typeof link.mtu === "number")
      steps.push({ kind: "ip", args: ["link", "set", "dev", name, "mtu", `${link.mtu}`] });
  };
  for (const link of data.links) {
    if (link.type === "bond" || link.type === "vlan") continue;
    const name = nameOf(names, link.id);
    // a bond takes only members that are down; it sets them up itself
    tune(link, name, undefined);
    steps.push({ kind: "ip", args: ["link", "set", "dev", name, bonded.has(link.id) ? "down" : "up"] });
  }
  for (const link of data.links) {
    if (link.type !== "bond") continue;
    const name = nameOf(names, link.id);
    const add = ["link", "add", "name", name, "type", "bond", "mode", link.bond_mode ?? "balance-rr"];
    add.push("miimon", `${link.bond_miimon ?? DEFAULT_MIIMON}`);
    if (link.bond_xmit_hash_policy !== undefined) add.push("xmit_hash_policy", link.bond_xmit_hash_policy);
    // NOTE: loading the bonding driver creates bond0 (its max_bonds defaults to 1): then it is reconfigured
    steps.push({ kind: "ip", args: add, ifExists: ["link", "set", "dev", name, ...add.slice(4)] });
    for (const member of link.bond_links ?? [])
      steps.push({ kind: "ip", args: ["link", "set", "dev", nameOf(names, member), "master", name] });
    tune(link, name, link.ethernet_mac_address);
    steps.push({ kind: "ip", args: ["link", "set", "dev", name, "up"] });
  }
  for (const link of data.links) {
    if (link.type !== "vlan") continue;
    const name = nameOf(names, link.id);
    const parent = nameOf(names, link.vlan_link ?? "");
    steps.push({
      kind: "ip",
      args: ["link", "add", "link", parent, "name", name, "type", "vlan", "id", `${link.vlan_id}`],
    });
    tune(link, name, link.vlan_mac_address ?? link.ethernet_mac_address);
    steps.push({ kind: "ip", args: ["link", "set", "dev", name, "up"] });
  }
  let defaults = 0;
  for (const network of data.networks) {
    const name = nameOf(names, network.link);
    if (network.type === "ipv4_dhcp") {
      steps.push({ kind: "dhcp4", link: name, argv: udhcpcArgv(name, options.dhcpScript) });
      continue;
    }
    const address = staticPrefix(network);
    if (address === null) continue;
    const family = network.type === "ipv4" ? "-4" : "-6";
    // nodad: the address is ours by the operator's word, and a deploy must not wait a second per address
    const flags = family === "-6" ? ["nodad"] : [];
    steps.push({
      kind: "ip",
      args: [family, "addr", "replace", `${address.address}/${address.prefix}`, "dev", name, ...flags],
    });
    for (const route of network.routes ?? []) {
      const prefix = prefixLength(route.netmask) ?? 0;
      const isDefault = prefix === 0;
      const to = isDefault ? "default" : `${route.network}/${prefix}`;
      const metric = isDefault ? ["metric", `${ROUTE_METRIC_BASE + defaults++}`] : [];
      steps.push({
        kind: "ip",
        args: [
          isIPv4(route.network) ? "-4" : "-6",
          "route",
          "replace",
          to,
          "via",
          route.gateway,
          "dev",
          name,
          ...metric,
        ],
      });
    }
  }
  const resolv = resolvConf(data);
  if (resolv !== null) steps.push({ kind: "write", path: options.resolvConf, content: resolv });
  else if (!data.networks.some((network) => network.type === "ipv4_dhcp"))
    warnings.push("no DNS server in the network data: resolv.conf left as it is");
  return { steps, names, warnings };
}

/** Link id → interface name: physical links by MAC, bonds bond0.., VLANs PARENT.ID (vlanID when too long). */
function nameLinks(links: readonly NetworkDataLink[], machine: readonly MachineLink[]): Map<string, string> {
  const byMac = new Map(machine.map((link) => [link.mac.toLowerCase(), link.name]));
  const names = new Map<string, string>();
  const kindOf = new Map(links.map((link) => [link.id, link.type]));
  for (const link of links) {
    if (link.type === "bond" || link.type === "vlan") continue;
    const mac = link.ethernet_mac_address ?? "";
    const name = byMac.get(mac);
    if (name === undefined) {
      const here = machine.map((l) => `${l.name} ${l.mac}`).join(", ") || "none";
      throw new NetPlanError(
        `link ${JSON.stringify(link.id)} (${mac}) is not on this machine (its links: ${here})`,
      );
    }
    if ([...names.values()].includes(name))
      throw new NetPlanError(
        `link ${JSON.stringify(link.id)} (${mac}) is the same interface ${name} as another link`,
      );
    names.set(link.id, name);
  }
  const owner = new Map<string, string>();
  let bonds = 0;
  for (const link of links) {
    if (link.type !== "bond") continue;
    for (const member of link.bond_links ?? []) {
      if (kindOf.get(member) === "bond" || kindOf.get(member) === "vlan")
        throw new NetPlanError(
          `bond ${JSON.stringify(link.id)}: member ${JSON.stringify(member)} is not a physical link`,
        );
      const other = owner.get(member);
      if (other !== undefined)
        throw new NetPlanError(
          `link ${JSON.stringify(member)} is a member of two bonds (${other}, ${link.id})`,
        );
      owner.set(member, link.id);
    }
    names.set(link.id, `bond${bonds++}`);
  }
  for (const link of links) {
    if (link.type !== "vlan") continue;
    const parentId = link.vlan_link ?? "";
    if (kindOf.get(parentId) === "vlan")
      throw new NetPlanError(`vlan ${JSON.stringify(link.id)} is on another VLAN (QinQ is not supported)`);
    if (owner.has(parentId))
      throw new NetPlanError(
        `vlan ${JSON.stringify(link.id)} is on ${JSON.stringify(parentId)}, a bond member`,
      );
    const parent = nameOf(names, parentId);
    const long = `${parent}.${link.vlan_id}`;
    const name = long.length <= IFNAMSIZ ? long : `vlan${link.vlan_id}`;
    if ([...names.values()].includes(name))
      throw new NetPlanError(
        `vlan ${JSON.stringify(link.id)}: a second VLAN ${link.vlan_id} would also be named ${name}`,
      );
    names.set(link.id, name);
  }
  return names;
}

function nameOf(names: ReadonlyMap<string, string>, id: string): string {
  const name = names.get(id);
  // the schema checked every reference, so this is a planner bug, not bad data
  if (name === undefined) throw new NetPlanError(`link ${JSON.stringify(id)} has no interface`);
  return name;
}

/** Per interface, the IPv6 sysctls the networks on it need: router advertisements for SLAAC/DHCPv6. */
function ipv6Sysctls(
  networks: readonly NetworkDataNetwork[],
  names: ReadonlyMap<string, string>,
  warnings: string[],
): Map<string, [string, number][]> {
  const out = new Map<string, [string, number][]>();
  for (const network of networks) {
    const name = nameOf(names, network.link);
    switch (network.type) {
      case "ipv6_dhcp":
      case "ipv6_dhcpv6-stateful":
        warnings.push(
          `${name}: ${network.type}: the ramdisk has no DHCPv6 client; only router advertisements (SLAAC) configure it`,
        );
        break;
      case "ipv6_slaac":
      case "ipv6_dhcpv6-stateless":
        break;
      case "ipv4":
      case "ipv6":
      case "ipv4_dhcp":
        continue;
    }
    out.set(name, [
      ["accept_ra", 1],
      ["autoconf", 1],
    ]);
  }
  return out;
}

/** resolv.conf from the top-level dns services, then each network's servers; null when there are none. */
export function resolvConf(data: NetworkData): string | null {
  const servers: string[] = [];
  const add = (address: string): void => {
    if (!servers.includes(address)) servers.push(address);
  };
  for (const service of data.services) if (service.type === "dns") add(service.address);
  for (const network of data.networks) {
    for (const address of network.dns_nameservers ?? []) add(address);
    for (const service of network.services ?? []) if (service.type === "dns") add(service.address);
  }
  // a service address is free text in the schema: only addresses reach the file
  const usable = servers.filter((server) => isIP(server) !== 0);
  if (usable.length === 0) return null;
  return `# from network_data.json (anvil-agent netconfig)\n${usable.map((s) => `nameserver ${s}\n`).join("")}`;
}

/** The ramdisk's DHCPv4 client, as /init starts it. */
function udhcpcArgv(link: string, script: string): string[] {
  return [
    "udhcpc",
    "-f",
    "-i",
    link,
    "-s",
    script,
    "-t",
    "10",
    "-T",
    "2",
    "-A",
    "5",
    "-x",
    "hostname:anvil-ramdisk",
  ];
}
