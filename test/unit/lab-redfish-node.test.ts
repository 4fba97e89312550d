import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { planNetwork } from "../../agent/network/plan.ts";
import { parseNetworkData } from "../../shared/network-data.ts";
import {
  REDFISH_LAB_MAX_NODES,
  labNodeIdentity,
  pickSubnet,
  staticNetworkData,
  withTapNic,
} from "../../scripts/lab/redfish-node.ts";
import { labVmArgs } from "../../scripts/lab/vm-args.ts";

const PLAN = { resolvConf: "/etc/resolv.conf", procSys: "/proc/sys", dhcpScript: "/bin/udhcpc.script" };

describe("the Redfish lab node's network_data", () => {
  it("is what the ramdisk's netconfig takes: one static address on the NIC with that MAC, no DHCP", () => {
    const data = staticNetworkData({ mac: "52:54:00:b0:12:34", ip: "10.213.7.10", prefix: 24 });
    const parsed = parseNetworkData(JSON.stringify(data));
    const plan = planNetwork(parsed, [{ name: "eth0", mac: "52:54:00:b0:12:34" }], PLAN);
    const ip = plan.steps.flatMap((s) => (s.kind === "ip" ? [s.args.join(" ")] : []));
    expect(ip).toContain("-4 addr replace 10.213.7.10/24 dev eth0");
    expect(plan.steps.some((s) => s.kind === "dhcp4")).toBe(false);
    // the lab link has no DNS server: nothing but that is left out
    expect(plan.warnings).toEqual(["no DNS server in the network data: resolv.conf left as it is"]);
  });

  it("gives every prefix's netmask back as that prefix (generated)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 8, max: 30 }), (prefix) => {
        const data = staticNetworkData({ mac: "52:54:00:b0:00:01", ip: "10.213.1.10", prefix });
        const plan = planNetwork(
          parseNetworkData(JSON.stringify(data)),
          [{ name: "e", mac: "52:54:00:b0:00:01" }],
          PLAN,
        );
        return plan.steps.some(
          (s) => s.kind === "ip" && s.args.join(" ") === `-4 addr replace 10.213.1.10/${prefix} dev e`,
        );
      }),
    );
  });

  it("refuses a MAC or prefix it could not write", () => {
    expect(() => staticNetworkData({ mac: "52:54:00:B0:00:01", ip: "10.0.0.1", prefix: 24 })).toThrow(/MAC/);
    expect(() => staticNetworkData({ mac: "52:54:00:b0:00:01", ip: "10.0.0.1", prefix: 31 })).toThrow(
      /prefix/,
    );
  });
});

describe("the Redfish lab node's QEMU argv", () => {
  const argv = labVmArgs({
    dir: "/lab/vm",
    name: "lab-01",
    mac: "52:54:00:b0:00:01",
    memoryMb: 768,
    vcpus: 1,
    conductorPort: 1,
    disks: [{ file: "/lab/vm/a.qcow2", bus: "virtio", serial: "A" }],
  });

  it("has a tap NIC instead of slirp (whose built-in DHCP server would answer the node)", () => {
    const tapped = withTapNic(argv, "avm123456t");
    expect(tapped).toHaveLength(argv.length);
    expect(tapped.join(" ")).not.toMatch(/user,|guestfwd|bootfile/);
    expect(tapped[tapped.indexOf("-netdev") + 1]).toBe("tap,id=n0,ifname=avm123456t,script=no,downscript=no");
    expect(tapped).toContain("virtio-net-pci,netdev=n0,mac=52:54:00:b0:00:01");
  });

  it("refuses an argv without a user-mode NIC", () => {
    expect(() => withTapNic(withTapNic(argv, "t"), "t")).toThrow(/user-mode/);
  });
});

describe("the Redfish lab's subnet", () => {
  it("never picks a /24 the host already has (generated)", () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: 1, max: 254 }), { maxLength: 253 }),
        fc.double({ min: 0, max: 0.999999, noNaN: true }),
        (used, r) => {
          const picked = pickSubnet(
            used.map((n) => `10.213.${n}.1/24`),
            () => r,
          );
          const third = Number(picked.split(".")[2]);
          return picked.startsWith("10.213.") && !used.includes(third) && third >= 1 && third <= 254;
        },
      ),
    );
  });

  it("says so when every /24 is taken", () => {
    const all = Array.from({ length: 254 }, (_, i) => `10.213.${i + 1}.1/24`);
    expect(() => pickSubnet(all)).toThrow(/no free/);
  });
});

describe("the Redfish lab's nodes on one bridge", () => {
  it("keeps the first node what the single-node lab had: lab-01 at .10", () => {
    expect(labNodeIdentity("a1b2c3", 0, "10.213.7")).toEqual({
      name: "lab-01",
      mac: "52:54:00:b0:a1:b2",
      tap: "avma1b2c3t0",
      ip: "10.213.7.10",
    });
    expect(labNodeIdentity("a1b2c3", 1, "10.213.7")).toMatchObject({ name: "lab-02", ip: "10.213.7.11" });
  });

  it("gives every node of a lab its own name, MAC, tap and address, all valid (generated)", () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[0-9a-f]{6}$/), fc.integer({ min: 1, max: 254 }), (tag, third) => {
        const nodes = Array.from({ length: REDFISH_LAB_MAX_NODES }, (_, i) =>
          labNodeIdentity(tag, i, `10.213.${third}`),
        );
        for (const key of ["name", "mac", "tap", "ip"] as const)
          expect(new Set(nodes.map((n) => n[key])).size).toBe(nodes.length);
        for (const n of nodes) {
          // a MAC staticNetworkData takes; a Linux interface name (at most 15 bytes)
          expect(() => staticNetworkData({ mac: n.mac, ip: n.ip, prefix: 24 })).not.toThrow();
          expect(n.tap.length).toBeLessThanOrEqual(15);
        }
      }),
    );
  });

  it("refuses an index past the lab's size or a bad tag", () => {
    expect(() => labNodeIdentity("a1b2c3", REDFISH_LAB_MAX_NODES, "10.213.7")).toThrow(/index/);
    expect(() => labNodeIdentity("A1B2C3", 0, "10.213.7")).toThrow(/tag/);
  });
});
