import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type PortRecord, type PortgroupRecord, newPortRecord } from "../../shared/resources.ts";
import { vifNetworkData } from "../../conductor/drivers/network/network-data.ts";

const port = (uuid: string, extra: Partial<PortRecord> = {}): PortRecord =>
  newPortRecord({ uuid, address: `52:54:00:00:00:${uuid.slice(-2)}`, node_uuid: "n", ...extra });
const group = (uuid: string, extra: Partial<PortgroupRecord> = {}): PortgroupRecord => ({
  uuid,
  name: null,
  address: null,
  node_uuid: "n",
  standalone_ports_supported: true,
  internal_info: {},
  extra: {},
  mode: "802.3ad",
  properties: {},
  physical_network: null,
  category: null,
  dynamic_portgroup: false,
  created_at: "2026-01-01T00:00:00Z",
  updated_at: null,
  ...extra,
});
const vif = (id: string) => ({ internal_info: { tenant_vif_port_id: id } });

interface Shape {
  links: { id: string; type: string; ethernet_mac_address: string; vif_id?: string; bond_links?: string[] }[];
  networks: { id: string; type: string; link: string; network_id: string }[];
  services: unknown[];
}

describe("network_data.json from a node's attached VIFs (Ironic's neutron port data shape)", () => {
  it("is null when no port or port group holds a VIF", () => {
    expect(vifNetworkData([port("p1"), port("p2")], [group("g1")])).toBeNull();
  });

  it("gives a port holding a VIF a vif link with its MAC and a DHCP network on it", () => {
    const data = vifNetworkData([port("p1"), port("p2", vif("v2"))], []);
    expect(data).toEqual({
      links: [{ id: "p2", type: "vif", ethernet_mac_address: "52:54:00:00:00:p2", vif_id: "v2" }],
      networks: [{ id: "network0", type: "ipv4_dhcp", link: "p2", network_id: "v2" }],
      services: [],
    });
  });

  it("reads Ironic's legacy extra.vif_port_id too", () => {
    const data = vifNetworkData([port("p1", { extra: { vif_port_id: "old" } })], []) as Shape | null;
    expect(data?.links.map((l) => l.vif_id)).toEqual(["old"]);
  });

  it("makes a port group holding a VIF a bond over phy links for its members", () => {
    const ports = [port("p1", { portgroup_uuid: "g1" }), port("p2", { portgroup_uuid: "g1" })];
    const data = vifNetworkData(ports, [group("g1", { address: "52:54:00:00:00:aa", ...vif("vb") })]);
    expect(data).toEqual({
      links: [
        { id: "p1", type: "phy", ethernet_mac_address: "52:54:00:00:00:p1" },
        { id: "p2", type: "phy", ethernet_mac_address: "52:54:00:00:00:p2" },
        {
          id: "g1",
          type: "bond",
          ethernet_mac_address: "52:54:00:00:00:aa",
          vif_id: "vb",
          bond_links: ["p1", "p2"],
          bond_mode: "802.3ad",
        },
      ],
      networks: [{ id: "network0", type: "ipv4_dhcp", link: "g1", network_id: "vb" }],
      services: [],
    });
  });

  it("lists every attached VIF once, each network on a link that exists, the MAC its holder's", () => {
    const layout = fc.array(
      fc.record({
        vif: fc.option(fc.uuid(), { nil: undefined }),
        group: fc.option(fc.nat(2), { nil: undefined }),
      }),
      { maxLength: 8 },
    );
    const groupVifs = fc.array(fc.option(fc.uuid(), { nil: undefined }), { minLength: 3, maxLength: 3 });
    fc.assert(
      fc.property(layout, groupVifs, (specs, gvifs) => {
        const groups = gvifs.map((v, i) => group(`g${i}`, v ? vif(v) : {}));
        const ports = specs.map((spec, i) =>
          port(`p${String(i).padStart(2, "0")}`, {
            portgroup_uuid: spec.group === undefined ? null : `g${spec.group}`,
            ...(spec.vif ? vif(spec.vif) : {}),
          }),
        );
        const data = vifNetworkData(ports, groups) as Shape | null;
        // the VIFs that reach the instance: each group's with members, each lone or un-bonded port's
        const bondedGroups = groups.filter(
          (g) => g.internal_info.tenant_vif_port_id && ports.some((p) => p.portgroup_uuid === g.uuid),
        );
        const bonded = new Set(
          ports.filter((p) => bondedGroups.some((g) => g.uuid === p.portgroup_uuid)).map((p) => p.uuid),
        );
        const expected = [
          ...bondedGroups.map((g) => g.internal_info.tenant_vif_port_id),
          ...ports
            .filter((p) => !bonded.has(p.uuid) && p.internal_info.tenant_vif_port_id)
            .map((p) => p.internal_info.tenant_vif_port_id),
        ];
        if (expected.length === 0) return data === null;
        const ids = new Set(data?.links.map((l) => l.id));
        const withVif = data?.links.filter((l) => l.vif_id !== undefined) ?? [];
        const macOf = new Map(ports.map((p) => [p.uuid, p.address]));
        return (
          JSON.stringify(withVif.map((l) => l.vif_id).sort()) === JSON.stringify([...expected].sort()) &&
          (data?.networks ?? []).every((n) => ids.has(n.link)) &&
          withVif.filter((l) => l.type === "vif").every((l) => macOf.get(l.id) === l.ethernet_mac_address) &&
          ids.size === data?.links.length
        );
      }),
    );
  });
});
