import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  NETWORK_DATA_MAX_BYTES,
  NetworkDataError,
  parseNetworkData,
  prefixLength,
  staticPrefix,
} from "../../shared/network-data.ts";

const GOOD = {
  links: [
    { id: "p0", type: "phy", ethernet_mac_address: "52:54:00:AA:00:01", mtu: 1500 },
    { id: "v0", type: "vlan", vlan_link: "p0", vlan_id: 100 },
  ],
  networks: [
    {
      id: "n0",
      type: "ipv4",
      link: "v0",
      ip_address: "192.0.2.10",
      netmask: "255.255.255.0",
      routes: [{ network: "0.0.0.0", netmask: "0.0.0.0", gateway: "192.0.2.1" }],
    },
  ],
  services: [{ type: "dns", address: "192.0.2.53" }],
};

/** The message parseNetworkData throws for this value, or null when it parses. */
function failure(value: unknown): string | null {
  try {
    parseNetworkData(JSON.stringify(value));
    return null;
  } catch (error) {
    expect(error).toBeInstanceOf(NetworkDataError);
    return (error as Error).message;
  }
}

describe("network_data.json schema", () => {
  it("parses Nova's layout and lower-cases MACs", () => {
    const data = parseNetworkData(JSON.stringify(GOOD));
    expect(data.links[0]?.ethernet_mac_address).toBe("52:54:00:aa:00:01");
    expect(data.networks[0]?.routes?.[0]?.gateway).toBe("192.0.2.1");
  });

  it("names the bad field", () => {
    const bad = structuredClone(GOOD);
    bad.networks[0]!.routes![0]!.gateway = "192.0.2.300";
    expect(failure(bad)).toBe("network_data.json: networks[0].routes[0].gateway: not an IP address");
    const badMac = structuredClone(GOOD);
    badMac.links[0]!.ethernet_mac_address = "52-54-00-aa-00-01";
    expect(failure(badMac)).toMatch(
      /^network_data\.json: links\[0\]\.ethernet_mac_address: not a MAC address/,
    );
  });

  it("refuses references to links that are not there", () => {
    const bad = structuredClone(GOOD);
    bad.links[1]!.vlan_link = "nope";
    expect(failure(bad)).toMatch(/links\[1\]\.vlan_link: no link has the id "nope"/);
    const net = structuredClone(GOOD);
    net.networks[0]!.link = "gone";
    expect(failure(net)).toMatch(/networks\[0\]\.link: no link has the id "gone"/);
  });

  it("wants what each link and network type needs", () => {
    expect(failure({ links: [{ id: "b", type: "bond" }] })).toMatch(
      /links\[0\]\.bond_links: a bond link needs/,
    );
    expect(failure({ links: [{ id: "v", type: "vlan", vlan_link: "v" }] })).toMatch(/links\[0\]\.vlan_id/);
    expect(failure({ links: [{ id: "p", type: "phy" }] })).toMatch(/ethernet_mac_address: a physical link/);
    const v6 = { ...GOOD, networks: [{ type: "ipv6", link: "p0", ip_address: "192.0.2.1" }] };
    expect(failure(v6)).toMatch(/networks\[0\]\.ip_address: a static ipv6 network needs an IPv6/);
    const noMask = { ...GOOD, networks: [{ type: "ipv4", link: "p0", ip_address: "192.0.2.1" }] };
    expect(failure(noMask)).toMatch(/networks\[0\]\.netmask: needs a dotted netmask/);
    const holes = {
      ...GOOD,
      networks: [{ type: "ipv4", link: "p0", ip_address: "192.0.2.1", netmask: "255.0.255.0" }],
    };
    expect(failure(holes)).toMatch(/networks\[0\]\.netmask/);
    expect(failure({ networks: [{ type: "ipv5", link: "p0" }] })).toMatch(/networks\[0\]\.type/);
    expect(failure({ links: [{ id: "b", type: "bond", bond_links: ["b"], bond_mode: "fast" }] })).toMatch(
      /links\[0\]\.bond_mode/,
    );
  });

  it("refuses text that is not JSON, or too large, with NetworkDataError", () => {
    expect(() => parseNetworkData("{")).toThrow(/not JSON/);
    expect(() => parseNetworkData(" ".repeat(NETWORK_DATA_MAX_BYTES + 1))).toThrow(/larger than/);
    expect(() => parseNetworkData("[]")).toThrow(NetworkDataError);
  });

  it("reads prefixes from netmasks and from a /suffix", () => {
    expect(prefixLength("255.255.255.0")).toBe(24);
    expect(prefixLength("0.0.0.0")).toBe(0);
    expect(prefixLength("ffff:ffff:ffff:ffff::")).toBe(64);
    expect(prefixLength("::")).toBe(0);
    expect(prefixLength("255.255.0.255")).toBeNull();
    expect(staticPrefix({ type: "ipv6", ip_address: "2001:db8::5/56" })).toEqual({
      address: "2001:db8::5",
      prefix: 56,
    });
    expect(
      staticPrefix({ type: "ipv6", ip_address: "2001:db8::5", netmask: "ffff:ffff:ffff:ff00::" })?.prefix,
    ).toBe(56);
    expect(staticPrefix({ type: "ipv4", ip_address: "10.0.0.1", netmask: "255.255.255.0" })?.prefix).toBe(24);
    expect(staticPrefix({ type: "ipv4", ip_address: "10.0.0.1/33" })).toBeNull();
  });

  it("never throws anything but NetworkDataError on generated input", () => {
    const mac = fc.oneof(fc.constant("52:54:00:00:00:01"), fc.string({ maxLength: 20 }));
    const ip = fc.oneof(fc.ipV4(), fc.ipV6(), fc.string({ maxLength: 10 }), fc.constant("0.0.0.0"));
    const link = fc.record(
      {
        id: fc.oneof(fc.constantFrom("a", "b", "c"), fc.string()),
        type: fc.oneof(fc.constantFrom("phy", "bond", "vlan", "vif"), fc.string()),
        ethernet_mac_address: mac,
        mtu: fc.oneof(fc.integer(), fc.constant(null), fc.string()),
        bond_links: fc.array(fc.constantFrom("a", "b", "c", "x")),
        bond_mode: fc.oneof(fc.constantFrom("802.3ad", "active-backup"), fc.string()),
        vlan_link: fc.constantFrom("a", "b", "c"),
        vlan_id: fc.integer({ min: -2, max: 5000 }),
      },
      { requiredKeys: [] },
    );
    const network = fc.record(
      {
        type: fc.oneof(fc.constantFrom("ipv4", "ipv6", "ipv4_dhcp", "ipv6_slaac"), fc.string()),
        link: fc.constantFrom("a", "b", "c"),
        ip_address: fc.oneof(
          ip,
          fc.tuple(ip, fc.nat(200)).map(([a, p]) => `${a}/${p}`),
        ),
        netmask: fc.oneof(ip, fc.nat(200).map(String)),
        routes: fc.array(fc.record({ network: ip, netmask: ip, gateway: ip }, { requiredKeys: [] })),
        dns_nameservers: fc.array(ip),
      },
      { requiredKeys: [] },
    );
    const data = fc.oneof(
      fc.record(
        { links: fc.array(link), networks: fc.array(network), services: fc.anything() },
        { requiredKeys: [] },
      ),
      fc.anything(),
    );
    fc.assert(
      fc.property(
        fc.oneof(
          data.map((value) => JSON.stringify(value) ?? "null"),
          fc.string(),
        ),
        (text) => {
          try {
            parseNetworkData(text);
          } catch (error) {
            expect(error).toBeInstanceOf(NetworkDataError);
            // the message always says where: "network_data.json: <field>: <why>" or what the whole text is
            expect((error as Error).message).toMatch(/^network_data\.json(:| is)/);
          }
        },
      ),
      { numRuns: 1000 },
    );
  });
});
