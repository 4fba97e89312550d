import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { canonicalCpuArch, parseArchMap } from "../../conductor/config.ts";
import { ConfigError, loadConfig } from "../../conductor/config-loader.ts";
import { deployImageDefaultsOf, deployImagesFor } from "../../conductor/drivers/boot/deploy-images.ts";
import { IpxeBoot } from "../../conductor/drivers/boot/ipxe.ts";
import { PxeBoot } from "../../conductor/drivers/boot/pxe.ts";
import type { DriverNode } from "../../conductor/drivers/interfaces.ts";

const BY_ARCH = {
  kernel: "aarch64:http://10.0.0.1:8080/images/arm64/anvil.kernel,x86_64:http://10.0.0.1:8080/images/x86/k",
  ramdisk: "arm64:http://10.0.0.1:8080/images/arm64/anvil.initramfs,amd64:http://10.0.0.1:8080/images/x86/r",
};

function node(properties: Record<string, unknown>, driverInfo: Record<string, unknown> = {}): DriverNode {
  return {
    uuid: "0f3c1a52-8b1e-4c55-9a8e-1d2f3a4b5c6d",
    name: "arm-1",
    driver_info: driverInfo,
    properties,
    instance_info: {},
    driver_internal_info: {},
    ports: [{ address: "52:54:00:aa:bb:01", pxe_enabled: true }],
  };
}

/** The defaults as the conductor builds them from its settings (flags here). */
function defaultsFrom(argv: string[]) {
  return deployImageDefaultsOf(loadConfig({ argv, env: {} }).config.boot);
}

describe("deploy images per architecture (Ironic's deploy_kernel_by_arch / deploy_ramdisk_by_arch)", () => {
  const defaults = defaultsFrom([
    "--deploy-kernel",
    "http://d/default.kernel",
    "--deploy-ramdisk",
    "http://d/default.initramfs",
    "--deploy-kernel-by-arch",
    BY_ARCH.kernel,
    "--deploy-ramdisk-by-arch",
    BY_ARCH.ramdisk,
  ]);

  it.each(["aarch64", "arm64", "AArch64"])("a node whose cpu_arch is %s gets the arm64 files", (arch) => {
    expect(deployImagesFor(node({ cpu_arch: arch }), defaults)).toEqual({
      kernel: "http://10.0.0.1:8080/images/arm64/anvil.kernel",
      ramdisk: "http://10.0.0.1:8080/images/arm64/anvil.initramfs",
    });
  });

  it.each(["x86_64", "amd64"])("a node whose cpu_arch is %s gets the x86 files", (arch) => {
    expect(deployImagesFor(node({ cpu_arch: arch }), defaults)).toEqual({
      kernel: "http://10.0.0.1:8080/images/x86/k",
      ramdisk: "http://10.0.0.1:8080/images/x86/r",
    });
  });

  it("a node without cpu_arch, or of an architecture without files, gets the default pair", () => {
    const pair = { kernel: "http://d/default.kernel", ramdisk: "http://d/default.initramfs" };
    expect(deployImagesFor(node({}), defaults)).toEqual(pair);
    expect(deployImagesFor(node({ cpu_arch: "ppc64le" }), defaults)).toEqual(pair);
    expect(deployImagesFor(node({ cpu_arch: "" }), defaults)).toEqual(pair);
    // inherited names are no architecture
    expect(deployImagesFor(node({ cpu_arch: "constructor" }), defaults)).toEqual(pair);
  });

  it("the node's own driver_info still wins over the conductor's per-architecture files", () => {
    const own = { deploy_kernel: "http://own/k", deploy_ramdisk: "http://own/r" };
    expect(deployImagesFor(node({ cpu_arch: "aarch64" }, own), defaults)).toEqual({
      kernel: "http://own/k",
      ramdisk: "http://own/r",
    });
  });

  it("the iPXE script of an aarch64 node boots the arm64 files with the PL011 console", async () => {
    const root = await mkdtemp(join(tmpdir(), "anvil-ipxe-arch-"));
    try {
      const boot = new IpxeBoot({
        root,
        defaultDeployImages: defaults,
        kernelArgs: ["console=tty0", "console=ttyS0,115200n8"],
        kernelArgsByArch: { aarch64: ["console=tty0", "console=ttyAMA0,115200"] },
      });
      await boot.prepareRamdisk(node({ cpu_arch: "arm64" }), { agentParams: {} });
      const arm = await readFile(join(root, "nodes", "52-54-00-aa-bb-01.ipxe"), "utf8");
      expect(arm).toContain(
        "kernel http://10.0.0.1:8080/images/arm64/anvil.kernel console=tty0 console=ttyAMA0,115200 BOOTIF=01-52-54-00-aa-bb-01 || goto failed",
      );
      expect(arm).toContain("initrd http://10.0.0.1:8080/images/arm64/anvil.initramfs || goto failed");
      await boot.prepareRamdisk(node({ cpu_arch: "x86_64" }), { agentParams: {} });
      const x86 = await readFile(join(root, "nodes", "52-54-00-aa-bb-01.ipxe"), "utf8");
      expect(x86).toContain("kernel http://10.0.0.1:8080/images/x86/k console=tty0 console=ttyS0,115200n8 ");
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});

describe("PXE configs per architecture", () => {
  let root: string;
  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), "anvil-pxe-arch-"));
  });
  afterEach(async () => rm(root, { recursive: true, force: true }));

  it("an aarch64 node's GRUB config names the arm64 kernel and initramfs", async () => {
    const boot = new PxeBoot({
      root,
      defaultDeployImages: deployImageDefaultsOf({
        deployKernelByArch: "aarch64:arm64/anvil.kernel",
        deployRamdiskByArch: "aarch64:arm64/anvil.initramfs",
      }),
      kernelArgsByArch: { aarch64: ["console=ttyAMA0,115200"] },
    });
    await boot.prepareRamdisk(node({ cpu_arch: "aarch64", capabilities: "boot_mode:uefi" }), {
      agentParams: {},
    });
    const config = await readFile(join(root, "grub.cfg-01-52-54-00-aa-bb-01"), "utf8");
    expect(config).toContain("linux arm64/anvil.kernel console=ttyAMA0,115200 BOOTIF=01-52-54-00-aa-bb-01");
    expect(config).toContain("initrd arm64/anvil.initramfs");
  });
});

describe("the *_by_arch settings", () => {
  it("split each pair at its first colon, so URLs keep theirs, and make the keys canonical", () => {
    expect(parseArchMap("aarch64:http://h:8080/k, amd64:https://h/x")).toEqual({
      aarch64: "http://h:8080/k",
      x86_64: "https://h/x",
    });
    expect(canonicalCpuArch("ARM64")).toBe("aarch64");
    expect(canonicalCpuArch("x64")).toBe("x86_64");
  });

  it.each(["", "aarch64", "aarch64:", ":http://h/k", "arm64:http://a,aarch64:http://b", "a b:http://h"])(
    "refuse %j",
    (text) => {
      expect(parseArchMap(text)).toBeNull();
    },
  );

  it("a malformed setting stops the conductor at start, naming it", () => {
    expect(() => loadConfig({ argv: ["--deploy-kernel-by-arch", "aarch64"], env: {} })).toThrow(ConfigError);
    expect(() =>
      loadConfig({ argv: [], env: { ANVIL_DEPLOY_RAMDISK_BY_ARCH: "arm64:http://a,aarch64:http://b" } }),
    ).toThrow(/deploy/i);
  });

  it("round-trip any map of architectures to locations, and never throw on any text", () => {
    const arch = fc.constantFrom("aarch64", "x86_64", "ppc64le", "riscv64", "s390x");
    const location = fc.stringMatching(/^[a-z]+:\/\/[a-z0-9.:/_-]{1,30}$/);
    fc.assert(
      fc.property(fc.dictionary(arch, location, { minKeys: 1 }), (map) => {
        const text = Object.entries(map)
          .map(([key, value]) => `${key}:${value}`)
          .join(",");
        expect(parseArchMap(text)).toEqual(map);
      }),
    );
    fc.assert(
      fc.property(fc.string(), (text) => {
        const parsed = parseArchMap(text);
        if (parsed !== null) {
          for (const value of Object.values(parsed)) expect(value).not.toBe("");
        }
      }),
    );
  });
});
