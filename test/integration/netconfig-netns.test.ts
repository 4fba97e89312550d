import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exec } from "../../shared/system/exec.ts";
import type { ExecResult } from "../../shared/system/exec.ts";

// The agent's netconfig for real: a "node" namespace holding one end of a veth pair (the machine's NIC,
// found by its MAC) and a "peer" namespace holding the other (the router), network_data.json applied by
// `anvil-agent netconfig` run inside the node namespace (so it sees only that namespace's /sys and links).
const ROOT = resolve(import.meta.dirname, "../..");
const NODE_MAC = "52:54:00:6e:c0:01";
const canUseNetns = process.getuid?.() === 0;

async function run(command: string, args: string[]): Promise<ExecResult> {
  const result = await exec(command, args, { timeoutMs: 30_000 });
  if (result.code !== 0) throw new Error(`${command} ${args.join(" ")}: ${result.stderr.trim()}`);
  return result;
}

interface JsonAddr {
  ifname: string;
  mtu: number;
  operstate: string;
  addr_info: { family: string; local: string; prefixlen: number }[];
}
interface JsonRoute {
  dst: string;
  gateway?: string;
  dev: string;
  metric?: number;
}

describe.skipIf(!canUseNetns)(
  "netconfig applies network_data.json in a network namespace (needs root)",
  () => {
    const tag = randomBytes(3).toString("hex");
    const node = `anvil-nc-${tag}`;
    const peer = `anvil-np-${tag}`;
    let dir: string;
    // VLAN and bond need the kernel's 8021q and bonding drivers, which not every host kernel has (this
    // project's CI VMs run one without modules): those parts run when it can make the devices.
    let vlanSupport = false;

    const inNode = (args: string[]): Promise<ExecResult> =>
      exec("ip", ["netns", "exec", node, ...args], { timeoutMs: 60_000 });
    const json = async <T>(ns: string, args: string[]): Promise<T> =>
      JSON.parse((await run("ip", ["-n", ns, "-j", ...args])).stdout) as T;
    const netconfig = async (data: object): Promise<ExecResult> => {
      const file = join(dir, `network_data-${randomBytes(3).toString("hex")}.json`);
      await writeFile(file, JSON.stringify(data));
      const agent = ["node", "--import", "tsx", join(ROOT, "agent/main.ts")];
      return inNode([
        ...agent,
        "netconfig",
        "--network-data",
        file,
        "--resolv-conf",
        join(dir, "resolv.conf"),
      ]);
    };

    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), "anvil-netconfig-"));
      await run("ip", ["netns", "add", node]);
      await run("ip", ["netns", "add", peer]);
      await run("ip", [
        "-n",
        node,
        "link",
        "add",
        "nic0",
        "address",
        NODE_MAC,
        "type",
        "veth",
        "peer",
        "name",
        "up0",
        "netns",
        peer,
      ]);
      await run("ip", ["-n", peer, "link", "set", "lo", "up"]);
      await run("ip", ["-n", peer, "addr", "add", "192.0.2.1/24", "dev", "up0"]);
      await run("ip", ["-n", peer, "addr", "add", "2001:db8::1/64", "dev", "up0", "nodad"]);
      await run("ip", ["-n", peer, "addr", "add", "198.51.100.1/32", "dev", "lo"]);
      await run("ip", ["-n", peer, "link", "set", "up0", "up"]);
      const probe = await exec("ip", [
        "-n",
        peer,
        "link",
        "add",
        "link",
        "up0",
        "name",
        "up0.7",
        "type",
        "vlan",
        "id",
        "7",
      ]);
      vlanSupport = probe.code === 0;
      if (vlanSupport) {
        await run("ip", ["-n", peer, "addr", "add", "203.0.113.1/24", "dev", "up0.7"]);
        await run("ip", ["-n", peer, "link", "set", "up0.7", "up"]);
      }
    });

    afterAll(async () => {
      await exec("ip", ["netns", "del", node]);
      await exec("ip", ["netns", "del", peer]);
      await rm(dir, { recursive: true, force: true });
    });

    it("refuses data naming a link this machine does not have, and changes nothing", async () => {
      const result = await netconfig({
        links: [{ id: "x", type: "phy", ethernet_mac_address: "52:54:00:99:99:99" }],
        networks: [{ type: "ipv4", link: "x", ip_address: "192.0.2.10/24" }],
      });
      expect(result.code).toBe(1);
      expect(result.stdout).toContain(
        `netconfig failed: link "x" (52:54:00:99:99:99) is not on this machine (its links: nic0 ${NODE_MAC})`,
      );
      const [nic] = await json<JsonAddr[]>(node, ["addr", "show", "dev", "nic0"]);
      expect(nic?.addr_info.filter((a) => a.family === "inet")).toEqual([]);
    });

    it("static IPv4 + IPv6, MTU, routes and DNS, reachable over the wire", async () => {
      const links: object[] = [
        { id: "port-0", type: "phy", ethernet_mac_address: NODE_MAC.toUpperCase(), mtu: 1400 },
      ];
      const networks: object[] = [
        {
          id: "v4",
          type: "ipv4",
          link: "port-0",
          ip_address: "192.0.2.10",
          netmask: "255.255.255.0",
          routes: [
            { network: "0.0.0.0", netmask: "0.0.0.0", gateway: "192.0.2.1" },
            { network: "198.51.100.0", netmask: "255.255.255.0", gateway: "192.0.2.1" },
          ],
          dns_nameservers: ["192.0.2.53"],
        },
        {
          id: "v6",
          type: "ipv6",
          link: "port-0",
          ip_address: "2001:db8::10/64",
          routes: [{ network: "::", netmask: "::", gateway: "2001:db8::1" }],
        },
      ];
      const result = await netconfig({ links, networks, services: [{ type: "dns", address: "192.0.2.54" }] });
      expect(result.stderr).toBe("");
      expect(result.code, result.stdout).toBe(0);
      expect(result.stdout).toContain("link port-0 is nic0");
      expect(result.stdout).toContain("done: ip -4 addr replace 192.0.2.10/24 dev nic0");

      const [nic] = await json<JsonAddr[]>(node, ["addr", "show", "dev", "nic0"]);
      expect(nic?.mtu).toBe(1400);
      const addresses = nic?.addr_info.map((a) => `${a.local}/${a.prefixlen}`);
      expect(addresses).toEqual(expect.arrayContaining(["192.0.2.10/24", "2001:db8::10/64"]));
      const v4 = await json<JsonRoute[]>(node, ["-4", "route", "show"]);
      expect(v4).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ dst: "default", gateway: "192.0.2.1", dev: "nic0", metric: 10 }),
          expect.objectContaining({ dst: "198.51.100.0/24", gateway: "192.0.2.1", dev: "nic0" }),
        ]),
      );
      const v6 = await json<JsonRoute[]>(node, ["-6", "route", "show"]);
      expect(v6).toEqual(
        expect.arrayContaining([expect.objectContaining({ dst: "default", gateway: "2001:db8::1" })]),
      );
      expect(await readFile(join(dir, "resolv.conf"), "utf8")).toBe(
        "# from network_data.json (anvil-agent netconfig)\nnameserver 192.0.2.54\nnameserver 192.0.2.53\n",
      );

      for (const target of ["192.0.2.1", "198.51.100.1", "2001:db8::1"]) {
        // busybox's ping, as the ramdisk has (the host may have no iputils)
        const ping = await inNode([
          "busybox",
          target.includes(":") ? "ping6" : "ping",
          "-c",
          "1",
          "-W",
          "5",
          target,
        ]);
        expect(ping.code, `ping ${target}: ${ping.stdout}${ping.stderr}`).toBe(0);
      }
    });

    it("a VLAN on the NIC, pinged over", async (ctx) => {
      if (!vlanSupport)
        return ctx.skip("this host's kernel has no 8021q (the QEMU ramdisk test covers VLAN and bond)");
      const result = await netconfig({
        links: [
          { id: "p", type: "phy", ethernet_mac_address: NODE_MAC },
          { id: "vlan-7", type: "vlan", vlan_link: "p", vlan_id: 7 },
        ],
        networks: [{ type: "ipv4", link: "vlan-7", ip_address: "203.0.113.10", netmask: "255.255.255.0" }],
      });
      expect(result.code, result.stdout).toBe(0);
      expect(result.stdout).toContain("link vlan-7 is nic0.7");
      const ping = await inNode(["busybox", "ping", "-c", "1", "-W", "5", "203.0.113.1"]);
      expect(ping.code, `ping over the VLAN: ${ping.stdout}`).toBe(0);
    });

    it("running it again over the same configuration succeeds (addr/route replace)", async () => {
      const result = await netconfig({
        links: [{ id: "p", type: "phy", ethernet_mac_address: NODE_MAC }],
        networks: [{ type: "ipv4", link: "p", ip_address: "192.0.2.10/24" }],
      });
      expect(result.code, result.stdout).toBe(0);
    });
  },
);
