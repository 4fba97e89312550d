import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exec } from "../../shared/system/exec.ts";
import type { ExecResult } from "../../shared/system/exec.ts";
import { ensureAgentBuilt } from "../helpers/agent.ts";
import { startQemu } from "../helpers/qemu.ts";
import type { QemuVm } from "../helpers/qemu.ts";

// The no-DHCP path of the real ramdisk (issue 26's virtual-media contract): the kernel boots with
// anvil.netconfig=vmedia and a CD labelled ANVIL_VMEDIA holding openstack/latest/network_data.json; /init
// mounts it and runs `anvil-agent netconfig`, which builds an active-backup bond over the guest's two NICs
// and a VLAN on it with Debian's kernel and iproute2, a static address on the bond, and no DHCP server
// anywhere. The agent then dials the "conductor" (a listener in the namespace) over the bond.
const ROOT = resolve(import.meta.dirname, "../..");
const MACS = ["52:54:00:6e:c1:01", "52:54:00:6e:c1:02"];
const HOST = "10.88.0.1";
const GUEST = "10.88.0.10";
const PORT = 8187;
const canUseNetns = process.getuid?.() === 0;

async function run(command: string, args: string[], timeoutMs = 60_000): Promise<ExecResult> {
  const result = await exec(command, args, { timeoutMs });
  if (result.code !== 0) throw new Error(`${command} ${args.join(" ")}: ${result.stderr.trim()}`);
  return result;
}

const NETWORK_DATA = {
  links: [
    { id: "nic-a", type: "phy", ethernet_mac_address: MACS[0] },
    { id: "nic-b", type: "phy", ethernet_mac_address: MACS[1] },
    {
      id: "bond",
      type: "bond",
      bond_links: ["nic-a", "nic-b"],
      bond_mode: "active-backup",
      bond_miimon: 100,
    },
    { id: "vlan-42", type: "vlan", vlan_link: "bond", vlan_id: 42 },
  ],
  networks: [
    {
      id: "provisioning",
      type: "ipv4",
      link: "bond",
      ip_address: GUEST,
      netmask: "255.255.255.0",
      routes: [{ network: "0.0.0.0", netmask: "0.0.0.0", gateway: HOST }],
    },
    { id: "storage", type: "ipv4", link: "vlan-42", ip_address: "172.16.42.10", netmask: "255.255.255.0" },
    { id: "v6", type: "ipv6", link: "bond", ip_address: "fd88::10/64" },
  ],
  services: [{ type: "dns", address: HOST }],
};

/** A one-shot listener in the namespace: prints the first request line it gets, then exits. */
const LISTENER = `
const server = require("node:net").createServer((socket) => {
  socket.once("data", (data) => {
    process.stdout.write(data.toString().split("\\r\\n")[0] + "\\n");
    socket.destroy();
    server.close();
  });
});
server.listen(${PORT}, "${HOST}");
`;

describe.skipIf(!canUseNetns)(
  "the ramdisk configures a bond and a VLAN from the virtual-media ISO (needs root)",
  () => {
    const ns = `anvil-vm-${randomBytes(3).toString("hex")}`;
    let dir: string;
    let vm: QemuVm | undefined;
    let listener: Promise<ExecResult> | undefined;
    const stopListener = new AbortController();

    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), "anvil-netconfig-vm-"));
      const agent = await ensureAgentBuilt();
      await run("bash", [join(ROOT, "images/ramdisk/build.sh"), "--agent", agent, "--out", dir], 900_000);
      const latest = join(dir, "iso", "openstack", "latest");
      await mkdir(latest, { recursive: true });
      await writeFile(join(latest, "network_data.json"), JSON.stringify(NETWORK_DATA));
      const iso = join(dir, "vmedia.iso");
      await run("genisoimage", ["-quiet", "-o", iso, "-V", "ANVIL_VMEDIA", "-r", "-J", join(dir, "iso")]);

      await run("ip", ["netns", "add", ns]);
      const inNs = (args: string[]): Promise<ExecResult> => run("ip", ["-n", ns, ...args]);
      await inNs(["link", "set", "lo", "up"]);
      await inNs(["link", "add", "br0", "type", "bridge"]);
      await inNs(["addr", "add", `${HOST}/24`, "dev", "br0"]);
      for (const tap of ["tap0", "tap1"]) {
        await inNs(["tuntap", "add", "dev", tap, "mode", "tap"]);
        await inNs(["link", "set", tap, "master", "br0"]);
        await inNs(["link", "set", tap, "up"]);
      }
      await inNs(["link", "set", "br0", "up"]);
      listener = exec("ip", ["netns", "exec", ns, process.execPath, "-e", LISTENER], {
        timeoutMs: 900_000,
        signal: stopListener.signal,
      });

      vm = await startQemu({
        memoryMb: 512,
        netns: ns,
        nics: MACS.map((mac, index) => ({ kind: "tap" as const, mac, ifname: `tap${index}` })),
        boot: {
          kernel: join(dir, "anvil.kernel"),
          initrd: join(dir, "anvil.initramfs"),
          append: `console=ttyS0 anvil.conductor=ws://${HOST}:${PORT}/v1/agent anvil.netconfig=vmedia`,
        },
        extraArgs: ["-drive", `file=${iso},media=cdrom,readonly=on,if=ide`],
      });
    }, 1_000_000);

    afterAll(async () => {
      await vm?.stop();
      await exec("ip", ["netns", "del", ns]);
      stopListener.abort();
      await listener?.catch(() => undefined);
      if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    });

    it("netconfig builds the bond and VLAN, no DHCP runs, and the agent dials over the bond", async () => {
      if (vm === undefined) throw new Error("no VM");
      const log = await vm.waitForSerial(/anvil-init: starting agent/, {
        timeoutMs: 600_000,
        failOn: /Kernel panic/,
      });
      expect(log).toMatch(/anvil-init: vmedia: \/dev\/sr0 mounted at \/run\/anvil\/vmedia/);
      expect(log).toContain("anvil-agent netconfig: link bond is bond0");
      // the bonding driver made bond0 when it loaded: netconfig reconfigured it rather than failing
      expect(log).not.toContain("netconfig failed");
      expect(log).toContain("anvil-agent netconfig: link vlan-42 is bond0.42");
      expect(log).toContain(
        "anvil-agent netconfig: done: ip link add name bond0 type bond mode active-backup miimon 100",
      );
      expect(log).toContain(
        "anvil-agent netconfig: done: ip link add link bond0 name bond0.42 type vlan id 42",
      );
      expect(log).toContain(`anvil-agent netconfig: done: ip -4 addr replace 172.16.42.10/24 dev bond0.42`);
      expect(log).toContain("anvil-init: vmedia: network configured from network_data.json");
      expect(log).not.toContain("DHCP on");
      // the agent's WebSocket upgrade reached the listener, from the static address over the bond
      const first = await listener;
      expect(first?.stdout).toBe("GET /v1/agent HTTP/1.1\n");
    }, 900_000);
  },
);
