import { describe, expect, it } from "vitest";
import { parseNetworkData } from "../../shared/network-data.ts";
import { applyPlan, describeStep } from "../../agent/network/apply.ts";
import type { NetRunner } from "../../agent/network/apply.ts";
import { NetPlanError, planNetwork } from "../../agent/network/plan.ts";
import type { MachineLink, NetStep } from "../../agent/network/plan.ts";

const OPTIONS = {
  resolvConf: "/etc/resolv.conf",
  procSys: "/proc/sys",
  dhcpScript: "/etc/anvil/udhcpc.script",
};
const MACHINE: MachineLink[] = [
  { name: "eno1", mac: "52:54:00:00:00:01" },
  { name: "eno2", mac: "52:54:00:00:00:02" },
  { name: "eno3", mac: "52:54:00:00:00:03" },
];
const phy = (id: string, n: number, extra: object = {}): object => ({
  id,
  type: "phy",
  ethernet_mac_address: `52:54:00:00:00:0${n}`,
  ...extra,
});

function plan(
  data: object,
  machine = MACHINE,
): { lines: string[]; warnings: string[]; names: Map<string, string> } {
  const result = planNetwork(parseNetworkData(JSON.stringify(data)), machine, OPTIONS);
  return { lines: result.steps.map(describeStep), warnings: result.warnings, names: result.names };
}

describe("network plan", () => {
  it("static IPv4 on a physical link found by MAC, with MTU, routes and DNS", () => {
    const { lines, warnings } = plan({
      links: [phy("p", 2, { mtu: 9000 })],
      networks: [
        {
          type: "ipv4",
          link: "p",
          ip_address: "192.0.2.10",
          netmask: "255.255.255.0",
          routes: [
            { network: "0.0.0.0", netmask: "0.0.0.0", gateway: "192.0.2.1" },
            { network: "198.51.100.0", netmask: "255.255.255.128", gateway: "192.0.2.254" },
          ],
          dns_nameservers: ["192.0.2.53"],
        },
      ],
      services: [{ type: "dns", address: "192.0.2.54" }],
    });
    expect(lines).toEqual([
      "ip link set dev lo up",
      "ip link set dev eno2 mtu 9000",
      "ip link set dev eno2 up",
      "ip -4 addr replace 192.0.2.10/24 dev eno2",
      "ip -4 route replace default via 192.0.2.1 dev eno2 metric 10",
      "ip -4 route replace 198.51.100.0/25 via 192.0.2.254 dev eno2",
      "write /etc/resolv.conf: # from network_data.json (anvil-agent netconfig); nameserver 192.0.2.54; nameserver 192.0.2.53",
    ]);
    expect(warnings).toEqual([]);
  });

  it("static IPv6 with a /prefix or a netmask, and an IPv6 default route", () => {
    const { lines } = plan({
      links: [phy("p", 1)],
      networks: [
        {
          type: "ipv6",
          link: "p",
          ip_address: "2001:db8::10",
          netmask: "ffff:ffff:ffff:ffff::",
          routes: [{ network: "::", netmask: "::", gateway: "2001:db8::1" }],
        },
        { type: "ipv6", link: "p", ip_address: "2001:db8:1::10/56" },
      ],
    });
    expect(lines).toContain("ip -6 addr replace 2001:db8::10/64 dev eno1 nodad");
    expect(lines).toContain("ip -6 route replace default via 2001:db8::1 dev eno1 metric 10");
    expect(lines).toContain("ip -6 addr replace 2001:db8:1::10/56 dev eno1 nodad");
  });

  it("a bond over two links: members down, created with mode/miimon/hash, enslaved, then up", () => {
    const { lines, names } = plan({
      links: [
        phy("a", 1),
        phy("b", 2),
        {
          id: "bond",
          type: "bond",
          bond_links: ["a", "b"],
          bond_mode: "802.3ad",
          bond_xmit_hash_policy: "layer3+4",
          ethernet_mac_address: "52:54:00:00:00:01",
          mtu: 9000,
        },
      ],
      networks: [{ type: "ipv4", link: "bond", ip_address: "10.1.0.5", netmask: "255.255.0.0" }],
    });
    expect(names.get("bond")).toBe("bond0");
    expect(lines.slice(1)).toEqual([
      "ip link set dev eno1 down",
      "ip link set dev eno2 down",
      "ip link add name bond0 type bond mode 802.3ad miimon 100 xmit_hash_policy layer3+4",
      "ip link set dev eno1 master bond0",
      "ip link set dev eno2 master bond0",
      "ip link set dev bond0 address 52:54:00:00:00:01",
      "ip link set dev bond0 mtu 9000",
      "ip link set dev bond0 up",
      "ip -4 addr replace 10.1.0.5/16 dev bond0",
    ]);
  });

  it("VLANs over a physical link and over a bond, named PARENT.ID", () => {
    const { lines, names } = plan({
      links: [
        phy("a", 1),
        phy("b", 2),
        phy("c", 3),
        { id: "bond", type: "bond", bond_links: ["b", "c"], bond_mode: "active-backup", bond_miimon: 250 },
        { id: "v1", type: "vlan", vlan_link: "a", vlan_id: 100 },
        { id: "v2", type: "vlan", vlan_link: "bond", vlan_id: 200, vlan_mac_address: "52:54:00:00:00:02" },
      ],
      networks: [{ type: "ipv4", link: "v2", ip_address: "10.2.0.5", netmask: "255.255.255.0" }],
    });
    expect(Object.fromEntries(names)).toEqual({
      a: "eno1",
      b: "eno2",
      c: "eno3",
      bond: "bond0",
      v1: "eno1.100",
      v2: "bond0.200",
    });
    expect(lines).toContain("ip link add name bond0 type bond mode active-backup miimon 250");
    const vlan = lines.indexOf("ip link add link bond0 name bond0.200 type vlan id 200");
    expect(vlan).toBeGreaterThan(lines.indexOf("ip link set dev bond0 up"));
    expect(lines[vlan + 1]).toBe("ip link set dev bond0.200 address 52:54:00:00:00:02");
    expect(lines).toContain("ip link add link eno1 name eno1.100 type vlan id 100");
    expect(lines.at(-1)).toBe("ip -4 addr replace 10.2.0.5/24 dev bond0.200");
  });

  it("a VLAN whose PARENT.ID name passes 15 characters is vlanID", () => {
    const { names } = plan(
      { links: [phy("a", 1), { id: "v", type: "vlan", vlan_link: "a", vlan_id: 4000 }] },
      [{ name: "enp129s0f1np1", mac: "52:54:00:00:00:01" }],
    );
    expect(names.get("v")).toBe("vlan4000");
  });

  it("DHCPv4 starts the ramdisk's udhcpc; SLAAC turns on router advertisements before the link is up", () => {
    const { lines, warnings } = plan({
      links: [phy("a", 1), phy("b", 2)],
      networks: [
        { type: "ipv4_dhcp", link: "a" },
        { type: "ipv6_slaac", link: "b" },
        { type: "ipv6_dhcp", link: "b" },
      ],
    });
    expect(lines).toContain(
      "DHCPv4 on eno1: udhcpc -f -i eno1 -s /etc/anvil/udhcpc.script -t 10 -T 2 -A 5 -x hostname:anvil-ramdisk",
    );
    const ra = lines.indexOf("write /proc/sys/net/ipv6/conf/eno2/accept_ra: 1");
    expect(ra).toBeGreaterThan(0);
    expect(lines.indexOf("write /proc/sys/net/ipv6/conf/eno2/autoconf: 1")).toBeGreaterThan(ra);
    expect(lines.indexOf("ip link set dev eno2 up")).toBeGreaterThan(ra);
    expect(warnings).toEqual([expect.stringMatching(/^eno2: ipv6_dhcp: the ramdisk has no DHCPv6 client/)]);
  });

  it("two default routes get different metrics", () => {
    const route = (gateway: string): object => ({ network: "0.0.0.0", netmask: "0.0.0.0", gateway });
    const { lines } = plan({
      links: [phy("a", 1), phy("b", 2)],
      networks: [
        { type: "ipv4", link: "a", ip_address: "10.0.0.2/24", routes: [route("10.0.0.1")] },
        { type: "ipv4", link: "b", ip_address: "10.9.0.2/24", routes: [route("10.9.0.1")] },
      ],
    });
    expect(lines.filter((line) => line.includes("default"))).toEqual([
      "ip -4 route replace default via 10.0.0.1 dev eno1 metric 10",
      "ip -4 route replace default via 10.9.0.1 dev eno2 metric 11",
    ]);
  });

  it("warns when a static configuration names no DNS server", () => {
    const { warnings, lines } = plan({
      links: [phy("a", 1)],
      networks: [{ type: "ipv4", link: "a", ip_address: "10.0.0.2/24" }],
    });
    expect(warnings).toEqual(["no DNS server in the network data: resolv.conf left as it is"]);
    expect(lines.some((line) => line.includes("resolv.conf"))).toBe(false);
  });

  it("refuses a link that is not on this machine, naming it and the links there are", () => {
    expect(() => plan({ links: [phy("gone", 9)] })).toThrow(
      new NetPlanError(
        'link "gone" (52:54:00:00:00:09) is not on this machine (its links: eno1 52:54:00:00:00:01, eno2 52:54:00:00:00:02, eno3 52:54:00:00:00:03)',
      ),
    );
  });

  it("refuses layouts the kernel cannot build", () => {
    const bond = (id: string, members: string[]): object => ({ id, type: "bond", bond_links: members });
    expect(() => plan({ links: [phy("a", 1), bond("x", ["a"]), bond("y", ["a"])] })).toThrow(
      /member of two bonds/,
    );
    expect(() => plan({ links: [phy("a", 1), bond("x", ["a"]), bond("y", ["x"])] })).toThrow(
      /not a physical link/,
    );
    const vlan = (id: string, on: string, vid: number): object => ({
      id,
      type: "vlan",
      vlan_link: on,
      vlan_id: vid,
    });
    expect(() => plan({ links: [phy("a", 1), vlan("v", "a", 5), vlan("w", "v", 6)] })).toThrow(/QinQ/);
    expect(() => plan({ links: [phy("a", 1), bond("x", ["a"]), vlan("v", "a", 5)] })).toThrow(
      /a bond member/,
    );
    expect(() => plan({ links: [phy("a", 1), phy("b", 1)] })).toThrow(/same interface eno1/);
  });
});

describe("applying a plan", () => {
  it("runs the steps in order and stops at the first failure, naming it", async () => {
    const done: string[] = [];
    const runner: NetRunner = {
      ip: async (args) => {
        if (args.includes("bond")) throw new Error("Error: Unknown device type.");
        done.push(`ip ${args.join(" ")}`);
      },
      write: async (path) => void done.push(`write ${path}`),
      daemon: async (argv) => void done.push(`daemon ${argv[0]}`),
    };
    const steps: NetStep[] = [
      { kind: "write", path: "/proc/sys/x", content: "1\n" },
      { kind: "dhcp4", link: "eno1", argv: ["udhcpc", "-i", "eno1"] },
      { kind: "ip", args: ["link", "add", "name", "bond0", "type", "bond"] },
      { kind: "ip", args: ["link", "set", "dev", "bond0", "up"] },
    ];
    const reported: string[] = [];
    await expect(applyPlan(steps, runner, (line) => reported.push(line))).rejects.toThrow(
      "ip link add name bond0 type bond: Error: Unknown device type.",
    );
    expect(done).toEqual(["write /proc/sys/x", "daemon udhcpc"]);
    expect(reported).toHaveLength(2);
  });
});

describe("a bond that already exists", () => {
  it("is reconfigured with ip link set … type bond instead of failing", async () => {
    const calls: string[] = [];
    const runner: NetRunner = {
      ip: async (args) => {
        calls.push(args.join(" "));
        if (args[1] === "add") throw new Error("RTNETLINK answers: File exists");
      },
      write: async () => undefined,
      daemon: async () => undefined,
    };
    const data = parseNetworkData(
      JSON.stringify({
        links: [phy("a", 1), { id: "b", type: "bond", bond_links: ["a"], bond_mode: "802.3ad" }],
      }),
    );
    await applyPlan(planNetwork(data, MACHINE, OPTIONS).steps, runner);
    const add = calls.indexOf("link add name bond0 type bond mode 802.3ad miimon 100");
    expect(add).toBeGreaterThan(0);
    expect(calls[add + 1]).toBe("link set dev bond0 type bond mode 802.3ad miimon 100");
    expect(calls[add + 2]).toBe("link set dev eno1 master bond0");
  });
});
