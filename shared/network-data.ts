import { isIPv4, isIPv6 } from "node:net";
import { z } from "zod";

/**
 * OpenStack's network_data.json (what a config drive and Anvil's virtual-media ISO carry under
 * openstack/latest/): `links`, `networks` on those links, and `services`. Unknown keys are kept and ignored,
 * as cloud-init and glean do; the fields a host needs to configure itself are checked here, so that a
 * planner only ever sees well-formed data.
 */

/** The largest network_data.json read (Nova's for a 4-port node with IPv6 is ~3 KB). */
export const NETWORK_DATA_MAX_BYTES = 256 * 1024;

const MAC = /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/i;
const Id = z.string().min(1).max(255);
const Mac = z
  .string()
  .regex(MAC, "not a MAC address (aa:bb:cc:dd:ee:ff)")
  .transform((mac) => mac.toLowerCase());
const Mtu = z.number().int().min(68).max(65535);
const Ip = z.string().refine((value) => isIPv4(value) || isIPv6(value), "not an IP address");

/** The kernel bonding driver's modes, by the names Nova and the driver use. */
export const BOND_MODES = [
  "balance-rr",
  "active-backup",
  "balance-xor",
  "broadcast",
  "802.3ad",
  "balance-tlb",
  "balance-alb",
] as const;
const BOND_HASH_POLICIES = ["layer2", "layer2+3", "layer3+4", "encap2+3", "encap3+4", "vlan+srcmac"] as const;

/** A link is physical unless it is a bond or a VLAN; Nova names physical ones phy, vif, ovs, bridge, tap... */
const Link = z
  .object({
    id: Id,
    type: z.string().min(1).max(64),
    ethernet_mac_address: Mac.optional(),
    mtu: Mtu.nullish(),
    bond_links: z.array(Id).min(1).max(16).optional(),
    bond_mode: z.enum(BOND_MODES).optional(),
    bond_miimon: z.number().int().min(0).max(60_000).optional(),
    bond_xmit_hash_policy: z.enum(BOND_HASH_POLICIES).optional(),
    vlan_link: Id.optional(),
    vlan_id: z.number().int().min(1).max(4094).optional(),
    vlan_mac_address: Mac.optional(),
  })
  .loose()
  .superRefine((link, ctx) => {
    const need = (field: keyof typeof link, why: string): void => {
      if (link[field] === undefined) ctx.addIssue({ code: "custom", path: [field], message: why });
    };
    if (link.type === "bond") need("bond_links", "a bond link needs its member links");
    else if (link.type === "vlan") {
      need("vlan_link", "a vlan link needs the link it is on");
      need("vlan_id", "a vlan link needs its VLAN id");
    } else need("ethernet_mac_address", "a physical link is found by its MAC address");
  });

const Route = z
  .object({ network: Ip, netmask: Ip, gateway: Ip })
  .loose()
  .superRefine((route, ctx) => {
    // with a field that is no address at all, that field's own issue says it
    if (![route.network, route.netmask, route.gateway].every((v) => isIPv4(v) || isIPv6(v))) return;
    const family = isIPv4(route.network);
    for (const field of ["netmask", "gateway"] as const)
      if (isIPv4(route[field]) !== family)
        ctx.addIssue({ code: "custom", path: [field], message: "not of the route's address family" });
    if (prefixLength(route.netmask) === null)
      ctx.addIssue({ code: "custom", path: ["netmask"], message: "not a contiguous netmask" });
  });

const Service = z.object({ type: z.string().max(64), address: z.string().max(255) }).loose();

export const NETWORK_TYPES = [
  "ipv4",
  "ipv6",
  "ipv4_dhcp",
  "ipv6_dhcp",
  "ipv6_slaac",
  "ipv6_dhcpv6-stateful",
  "ipv6_dhcpv6-stateless",
] as const;

const Network = z
  .object({
    id: z.string().max(255).optional(),
    type: z.enum(NETWORK_TYPES),
    link: Id,
    ip_address: z.string().max(64).optional(),
    netmask: z.string().max(64).optional(),
    routes: z.array(Route).max(64).optional(),
    dns_nameservers: z.array(Ip).max(16).optional(),
    services: z.array(Service).max(16).optional(),
  })
  .loose()
  .superRefine((network, ctx) => {
    if (network.type !== "ipv4" && network.type !== "ipv6") return;
    const v4 = network.type === "ipv4";
    const [address, suffix] = (network.ip_address ?? "").split("/", 2);
    if (address === undefined || !(v4 ? isIPv4(address) : isIPv6(address))) {
      const message = `a static ${network.type} network needs an ${v4 ? "IPv4" : "IPv6"} ip_address`;
      ctx.addIssue({ code: "custom", path: ["ip_address"], message });
      return;
    }
    if (staticPrefix(network) === null) {
      const message =
        suffix !== undefined
          ? "the prefix length after / is out of range"
          : `needs a ${v4 ? "dotted" : "IPv6"} netmask (or a /prefix on ip_address)`;
      ctx.addIssue({ code: "custom", path: [suffix !== undefined ? "ip_address" : "netmask"], message });
    }
  });

export const NetworkDataSchema = z
  .object({
    links: z.array(Link).max(64).default([]),
    networks: z.array(Network).max(64).default([]),
    services: z.array(Service).max(16).default([]),
  })
  .loose()
  .superRefine((data, ctx) => {
    const ids = new Set<string>();
    data.links.forEach((link, index) => {
      if (ids.has(link.id))
        ctx.addIssue({
          code: "custom",
          path: ["links", index, "id"],
          message: `duplicate link id ${link.id}`,
        });
      ids.add(link.id);
    });
    data.links.forEach((link, index) => {
      const refs: [(string | number)[], string][] = (link.bond_links ?? []).map((id, i) => [
        ["bond_links", i],
        id,
      ]);
      if (link.vlan_link !== undefined) refs.push([["vlan_link"], link.vlan_link]);
      for (const [path, id] of refs)
        if (!ids.has(id))
          ctx.addIssue({
            code: "custom",
            path: ["links", index, ...path],
            message: `no link has the id ${JSON.stringify(id)}`,
          });
    });
    data.networks.forEach((network, index) => {
      if (!ids.has(network.link))
        ctx.addIssue({
          code: "custom",
          path: ["networks", index, "link"],
          message: `no link has the id ${JSON.stringify(network.link)}`,
        });
    });
  });

export type NetworkData = z.infer<typeof NetworkDataSchema>;
export type NetworkDataLink = NetworkData["links"][number];
export type NetworkDataNetwork = NetworkData["networks"][number];
export type NetworkDataRoute = NonNullable<NetworkDataNetwork["routes"]>[number];

/** network_data.json that cannot be used; the message names the field (`networks[1].netmask: ...`). */
export class NetworkDataError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "NetworkDataError";
  }
}

/**
 * Parses network_data.json's text. Never throws anything but NetworkDataError, whatever the input.
 * @throws NetworkDataError naming the first bad field (and how many more there are)
 */
export function parseNetworkData(text: string): NetworkData {
  if (Buffer.byteLength(text) > NETWORK_DATA_MAX_BYTES)
    throw new NetworkDataError(`network_data.json is larger than ${NETWORK_DATA_MAX_BYTES} bytes`);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new NetworkDataError(`network_data.json is not JSON: ${(error as Error).message}`);
  }
  return checkNetworkData(json, "network_data.json");
}

/**
 * Checks already-parsed network data (a node's `network_data` field, Ironic's validate_network_data), with the
 * same rules the ramdisk applies. @throws NetworkDataError naming `label`, the first bad field and the count
 */
export function checkNetworkData(json: unknown, label: string): NetworkData {
  const result = NetworkDataSchema.safeParse(json);
  if (result.success) return result.data;
  const [first, ...rest] = result.error.issues;
  const where = first === undefined ? "" : fieldPath(first.path);
  const more = rest.length > 0 ? ` (and ${rest.length} more problem${rest.length > 1 ? "s" : ""})` : "";
  throw new NetworkDataError(`${label}: ${where || "top level"}: ${first?.message ?? "invalid"}${more}`);
}

/** `networks[1].routes[0].gateway` from zod's path. */
function fieldPath(path: readonly PropertyKey[]): string {
  return path
    .map((part, index) =>
      typeof part === "number" ? `[${part}]` : `${index === 0 ? "" : "."}${String(part)}`,
    )
    .join("");
}

/** The prefix length of a contiguous netmask (IPv4 dotted or IPv6), or null. Pure. */
export function prefixLength(netmask: string): number | null {
  let bits: string;
  if (isIPv4(netmask))
    bits = netmask
      .split(".")
      .map((octet) => Number(octet).toString(2).padStart(8, "0"))
      .join("");
  else if (isIPv6(netmask) && !netmask.includes("."))
    bits = ipv6Groups(netmask)
      .map((g) => g.toString(2).padStart(16, "0"))
      .join("");
  else return null;
  const ones = bits.indexOf("0") < 0 ? bits.length : bits.indexOf("0");
  return bits.slice(ones).includes("1") ? null : ones;
}

/** The static address and prefix length of an ipv4/ipv6 network (`a/b` wins over netmask), or null. Pure. */
export function staticPrefix(network: {
  type: string;
  ip_address?: string | undefined;
  netmask?: string | undefined;
}): { address: string; prefix: number } | null {
  const [address = "", suffix] = (network.ip_address ?? "").split("/", 2);
  const max = network.type === "ipv4" ? 32 : 128;
  let prefix: number | null;
  if (suffix !== undefined) prefix = /^\d{1,3}$/.test(suffix) ? Number(suffix) : null;
  else if (network.netmask === undefined) prefix = null;
  else if (/^\d{1,3}$/.test(network.netmask)) prefix = Number(network.netmask);
  else prefix = isIPv4(network.netmask) === (network.type === "ipv4") ? prefixLength(network.netmask) : null;
  return prefix === null || prefix > max ? null : { address, prefix };
}

/** The eight 16-bit groups of a valid IPv6 address without an embedded IPv4 part. */
function ipv6Groups(address: string): number[] {
  const [head = "", tail] = address.split("::", 2);
  const parse = (part: string): number[] => (part === "" ? [] : part.split(":").map((g) => parseInt(g, 16)));
  const left = parse(head);
  const right = tail === undefined ? [] : parse(tail);
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}
