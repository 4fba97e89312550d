import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { InvalidDriverInfo } from "../../conductor/drivers/errors.ts";
import type { DriverNode } from "../../conductor/drivers/interfaces.ts";
import { PxeBoot } from "../../conductor/drivers/boot/pxe.ts";

function node(overrides: Partial<DriverNode> = {}): DriverNode {
  return {
    uuid: "0f3c1a52-8b1e-4c55-9a8e-1d2f3a4b5c6d",
    name: null,
    driver_info: { deploy_kernel: "anvil/vmlinuz", deploy_ramdisk: "anvil/initramfs" },
    properties: {},
    instance_info: {},
    driver_internal_info: {},
    ports: [{ address: "52-54-00-AA-BB-01", pxe_enabled: true }],
    ...overrides,
  };
}

describe("PxeBoot", () => {
  let root: string;
  let boot: PxeBoot;
  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), "anvil-pxe-"));
    boot = new PxeBoot({ root, kernelArgs: ["console=ttyS0"] });
  });
  afterEach(async () => rm(root, { recursive: true, force: true }));

  it("writes pxelinux.cfg/01-<mac> for BIOS", async () => {
    await boot.prepareRamdisk(node(), { agentParams: { "anvil.conductor": "ws://10.0.0.1:6385" } });
    const config = await readFile(join(root, "pxelinux.cfg", "01-52-54-00-aa-bb-01"), "utf8");
    expect(config).toContain("  kernel anvil/vmlinuz\n");
    expect(config).toContain(
      "  append initrd=anvil/initramfs console=ttyS0 anvil.conductor=ws://10.0.0.1:6385 BOOTIF=01-52-54-00-aa-bb-01\n",
    );
  });

  it("writes grub.cfg-01-<mac> for UEFI", async () => {
    await boot.prepareRamdisk(node({ properties: { capabilities: "boot_mode:uefi" } }), { agentParams: {} });
    const config = await readFile(join(root, "grub.cfg-01-52-54-00-aa-bb-01"), "utf8");
    expect(config).toContain("  linux anvil/vmlinuz console=ttyS0 BOOTIF=01-52-54-00-aa-bb-01\n");
    expect(config).toContain("  initrd anvil/initramfs\n");
  });

  it("boots the local disk after deployment", async () => {
    await boot.prepareInstance(node());
    expect(await readFile(join(root, "pxelinux.cfg", "01-52-54-00-aa-bb-01"), "utf8")).toContain(
      "localboot 0",
    );
  });

  it("removes both layouts on clean-up", async () => {
    await boot.prepareRamdisk(node(), { agentParams: {} });
    await boot.prepareRamdisk(node({ properties: { capabilities: "boot_mode:uefi" } }), { agentParams: {} });
    await boot.cleanUpRamdisk(node());
    expect((await readdir(root)).sort()).toEqual(["pxelinux.cfg"]);
    expect(await readdir(join(root, "pxelinux.cfg"))).toEqual([]);
  });

  it("refuses a hostile MAC and writes nothing", async () => {
    await expect(
      boot.prepareRamdisk(node({ ports: [{ address: "../../x", pxe_enabled: true }] }), { agentParams: {} }),
    ).rejects.toThrow(InvalidDriverInfo);
    expect(await readdir(root)).toEqual([]);
  });
});
