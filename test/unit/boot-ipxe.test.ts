import { mkdtemp, readdir, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { InvalidDriverInfo } from "../../conductor/drivers/errors.ts";
import type { DriverNode } from "../../conductor/drivers/interfaces.ts";
import { DISCOVERY_SCRIPT, IpxeBoot, ipxeEntryScript } from "../../conductor/drivers/boot/ipxe.ts";
import { pathInside } from "../../conductor/drivers/boot/boot-files.ts";

const UUID = "0f3c1a52-8b1e-4c55-9a8e-1d2f3a4b5c6d";

function node(overrides: Partial<DriverNode> = {}): DriverNode {
  return {
    uuid: UUID,
    name: "rack1-node7",
    driver_info: {
      deploy_kernel: "http://10.0.0.1:8080/images/vmlinuz",
      deploy_ramdisk: "http://10.0.0.1:8080/images/initramfs",
    },
    properties: {},
    instance_info: {},
    driver_internal_info: {},
    ports: [
      { address: "52:54:00:AA:BB:01", pxe_enabled: true },
      { address: "52:54:00:aa:bb:02", pxe_enabled: false },
    ],
    ...overrides,
  };
}

describe("IpxeBoot", () => {
  let root: string;
  let boot: IpxeBoot;
  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), "anvil-ipxe-"));
    boot = new IpxeBoot({ root, kernelArgs: ["console=ttyS0"] });
  });
  afterEach(async () => rm(root, { recursive: true, force: true }));

  it("writes a deploy script per PXE-enabled port with the agent's parameters on the kernel line", async () => {
    await boot.prepareRamdisk(node(), {
      agentParams: { "anvil.conductor": "ws://10.0.0.1:6385/v1/agent", "anvil.debug": "1" },
    });
    expect(await readdir(join(root, "nodes"))).toEqual(["52-54-00-aa-bb-01.ipxe"]);
    const script = await readFile(join(root, "nodes", "52-54-00-aa-bb-01.ipxe"), "utf8");
    expect(script.startsWith("#!ipxe\n")).toBe(true);
    expect(script).toContain(
      "kernel http://10.0.0.1:8080/images/vmlinuz console=ttyS0 anvil.conductor=ws://10.0.0.1:6385/v1/agent anvil.debug=1 BOOTIF=01-52-54-00-aa-bb-01 || goto failed",
    );
    expect(script).toContain("initrd http://10.0.0.1:8080/images/initramfs || goto failed");
    expect(script).toContain("boot || goto failed");
    expect(script).toContain("goto retry");
  });

  it("puts the node's driver_info.kernel_append_params in place of the defaults, %default% standing for them", async () => {
    const withAppend = (value: unknown) =>
      node({ driver_info: { ...node().driver_info, kernel_append_params: value } });
    const kernelLine = async () =>
      /^kernel (.*) \|\| goto failed$/m.exec(
        await readFile(join(root, "nodes", "52-54-00-aa-bb-01.ipxe"), "utf8"),
      )?.[1];
    const agentParams = { "anvil.conductor": "ws://10.0.0.1:6385/v1/agent" };
    await boot.prepareRamdisk(withAppend("%default%  anvil.lldp_timeout=10 nomodeset"), { agentParams });
    expect(await kernelLine()).toBe(
      "http://10.0.0.1:8080/images/vmlinuz console=ttyS0 anvil.lldp_timeout=10 nomodeset anvil.conductor=ws://10.0.0.1:6385/v1/agent BOOTIF=01-52-54-00-aa-bb-01",
    );
    // IPA's spelling, and without %default% the console words are gone, as in Ironic
    await boot.prepareRamdisk(withAppend("ipa-lldp-timeout=5"), { agentParams });
    expect(await kernelLine()).toBe(
      "http://10.0.0.1:8080/images/vmlinuz ipa-lldp-timeout=5 anvil.conductor=ws://10.0.0.1:6385/v1/agent BOOTIF=01-52-54-00-aa-bb-01",
    );
    for (const bad of [
      "anvil.conductor=ws://evil/v1/agent",
      "anvil.ca_fingerprint=00",
      "a=$(reboot)",
      'x="y',
      42,
    ]) {
      await expect(boot.prepareRamdisk(withAppend(bad), { agentParams })).rejects.toThrow(InvalidDriverInfo);
      expect(() => boot.validate(withAppend(bad))).toThrow(/kernel_append_params/);
    }
  });

  it("names the initrd on the command line under UEFI", async () => {
    await boot.prepareRamdisk(node({ properties: { capabilities: { boot_mode: "uefi" } } }), {
      agentParams: {},
    });
    const script = await readFile(join(root, "nodes", "52-54-00-aa-bb-01.ipxe"), "utf8");
    expect(script).toMatch(/kernel \S+ initrd=initramfs console=ttyS0/);
  });

  it("writes boot.ipxe that chains by the booting NIC's MAC", async () => {
    await boot.prepareRamdisk(node(), { agentParams: {} });
    const entry = await readFile(join(root, "boot.ipxe"), "utf8");
    expect(entry).toBe(ipxeEntryScript());
    expect(entry).toContain("chain nodes/${net0/mac:hexhyp}.ipxe || goto discovery");
    // a machine without a script of its own tries the discovery script, which exists only with discovery on
    expect(entry).toContain(`chain ${DISCOVERY_SCRIPT} || goto unknown`);
  });

  it("auto-discovery: writes a ramdisk script for any machine, BOOTIF from iPXE's MAC, and removes it", async () => {
    const withImages = new IpxeBoot({
      root,
      kernelArgs: ["console=ttyS0"],
      defaultDeployImages: { kernel: "http://10.0.0.1/k", ramdisk: "http://10.0.0.1/r.img" },
    });
    await withImages.prepareDiscovery({ agentParams: { "anvil.conductor": "ws://10.0.0.1/v1/agent" } });
    const script = await readFile(join(root, DISCOVERY_SCRIPT), "utf8");
    expect(script).toContain(
      "kernel http://10.0.0.1/k initrd=r.img console=ttyS0 anvil.conductor=ws://10.0.0.1/v1/agent BOOTIF=01-${net0/mac:hexhyp} || goto failed",
    );
    expect(script).toContain("initrd http://10.0.0.1/r.img || goto failed");
    await withImages.prepareDiscovery(null);
    await expect(stat(join(root, DISCOVERY_SCRIPT))).rejects.toThrow(/ENOENT/);
    await withImages.prepareDiscovery(null); // idempotent
    // without default deploy images there is nothing to boot an unknown machine into
    await expect(boot.prepareDiscovery({ agentParams: {} })).rejects.toThrow(InvalidDriverInfo);
  });

  it("uses configured deploy images when driver_info has none", async () => {
    const withDefaults = new IpxeBoot({
      root,
      defaultDeployImages: { kernel: "http://d/k", ramdisk: "http://d/r" },
    });
    await withDefaults.prepareRamdisk(node({ driver_info: {} }), { agentParams: {} });
    expect(await readFile(join(root, "nodes", "52-54-00-aa-bb-01.ipxe"), "utf8")).toContain(
      "kernel http://d/k ",
    );
  });

  it("prepareInstance makes a still-network-booting node boot its disk", async () => {
    await boot.prepareInstance(node());
    const bios = await readFile(join(root, "nodes", "52-54-00-aa-bb-01.ipxe"), "utf8");
    expect(bios).toContain("sanboot --no-describe --drive 0x80 || exit");
    await boot.prepareInstance(node({ properties: { capabilities: "boot_mode:uefi" } }));
    const uefi = await readFile(join(root, "nodes", "52-54-00-aa-bb-01.ipxe"), "utf8");
    expect(uefi).not.toContain("sanboot");
    expect(uefi.trim().split("\n").pop()).toBe("exit");
  });

  it("cleanUpRamdisk removes the node's files and is idempotent", async () => {
    await boot.prepareRamdisk(node(), { agentParams: {} });
    await boot.cleanUpRamdisk(node());
    await boot.cleanUpRamdisk(node());
    expect(await readdir(join(root, "nodes"))).toEqual([]);
    expect((await stat(join(root, "boot.ipxe"))).isFile()).toBe(true);
  });

  it.each([
    [{ "anvil.conductor": "ws://x y" }],
    [{ "anvil.conductor": "ws://x\nshell" }],
    [{ "anvil.conductor": "${root-path}" }],
    [{ "bad key": "1" }],
    [{ "anvil.x": 'a"b' }],
  ])("refuses agent parameters that could break the script: %j", async (agentParams) => {
    await expect(boot.prepareRamdisk(node(), { agentParams })).rejects.toThrow(InvalidDriverInfo);
    await expect(readdir(join(root, "nodes"))).rejects.toThrow(); // nothing written
  });

  it.each([
    ["a hostile MAC", { ports: [{ address: "../../../tmp/evil", pxe_enabled: true }] }],
    ["a MAC with a slash", { ports: [{ address: "52:54:00:aa:bb:01/../../x", pxe_enabled: true }] }],
    ["a hostile uuid", { uuid: "../../etc/x\n#!ipxe" }],
    ["no PXE port", { ports: [{ address: "52:54:00:aa:bb:01", pxe_enabled: false }] }],
    [
      "a deploy kernel that is not a URL",
      { driver_info: { deploy_kernel: "/etc/passwd", deploy_ramdisk: "http://x/r" } },
    ],
    [
      "a deploy kernel with a newline",
      { driver_info: { deploy_kernel: "http://x/k\nshell", deploy_ramdisk: "http://x/r" } },
    ],
  ])("refuses %s and writes nothing", async (_what, overrides) => {
    await expect(boot.prepareRamdisk(node(overrides), { agentParams: {} })).rejects.toThrow(
      InvalidDriverInfo,
    );
    expect(await readdir(root)).toEqual([]);
  });

  it("never builds a path outside the root", () => {
    expect(() => pathInside(root, "../x")).toThrow(/outside/);
    expect(() => pathInside(root, "/etc/passwd")).toThrow(/outside/);
    expect(() => pathInside(root, "nodes/../../x")).toThrow(/outside/);
    expect(pathInside(root, "nodes/a.ipxe")).toBe(join(root, "nodes", "a.ipxe"));
  });
});
