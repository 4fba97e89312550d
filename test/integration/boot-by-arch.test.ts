import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import Fastify from "fastify";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../conductor/config-loader.ts";
import { bootFilesPlugin } from "../../conductor/drivers/boot/http-plugin.ts";
import { httpBootRoot, ipmiHardware } from "../../conductor/drivers/registry.ts";
import type { DriverNode } from "../../conductor/drivers/interfaces.ts";

const FILES = ["x86/anvil.kernel", "x86/anvil.initramfs", "arm64/anvil.kernel", "arm64/anvil.initramfs"];

function node(mac: string, properties: Record<string, unknown>): DriverNode {
  return {
    uuid: "3c2b1a09-8f7e-4d6c-9b5a-000000000a64",
    name: null,
    driver_info: {},
    properties,
    instance_info: {},
    driver_internal_info: {},
    ports: [{ address: mac, pxe_enabled: true }],
  };
}

/**
 * The conductor's ipmi hardware type with iPXE, configured by flags as an operator would, and its boot files
 * served over real HTTP as the conductor serves them (/boot/): what a node fetches depends on its cpu_arch.
 */
describe("iPXE boot files per cpu_arch, over HTTP", () => {
  let dir: string;
  let app: FastifyInstance;
  let base: string;
  const bytes = new Map<string, Buffer>();
  let boot: ReturnType<typeof ipmiHardware>["boot"];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "anvil-boot-arch-"));
    // served as the conductor serves its boot root (the data dir's http/boot) under /boot/
    const root = join(dir, "http", "boot");
    await mkdir(root, { recursive: true });
    // NOTE: fetch keeps its connections alive; without this close() waited ~70 s for them.
    app = Fastify({ forceCloseConnections: true });
    await app.register(bootFilesPlugin, { prefix: "/boot", root });
    await app.listen({ host: "127.0.0.1", port: 0 });
    base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}/boot`;
    const config = loadConfig({
      argv: [
        "--data-dir",
        dir,
        "--deploy-kernel",
        `${base}/images/x86/anvil.kernel`,
        "--deploy-ramdisk",
        `${base}/images/x86/anvil.initramfs`,
        "--deploy-kernel-by-arch",
        `aarch64:${base}/images/arm64/anvil.kernel`,
        "--deploy-ramdisk-by-arch",
        `aarch64:${base}/images/arm64/anvil.initramfs`,
      ],
      env: {},
    }).config;
    expect(httpBootRoot(config)).toBe(root);
    // distinct random contents, so a byte comparison says which file was served
    for (const file of FILES) {
      const content = randomBytes(4096);
      bytes.set(file, content);
      await mkdir(dirname(join(root, "images", file)), { recursive: true });
      await writeFile(join(root, "images", file), content);
    }
    boot = ipmiHardware(config).boot;
  });
  afterAll(async () => {
    await app?.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  /** What iPXE would do: fetch the node's script, then the kernel and initrd it names. */
  async function fetchBoot(mac: string): Promise<{ kernel: Buffer; initrd: Buffer; cmdline: string }> {
    const script = await (await fetch(`${base}/nodes/${mac.replaceAll(":", "-")}.ipxe`)).text();
    const kernel = /^kernel (\S+) (.*) \|\| goto failed$/m.exec(script);
    const initrd = /^initrd (\S+) \|\| goto failed$/m.exec(script);
    expect(kernel, script).not.toBeNull();
    expect(initrd, script).not.toBeNull();
    const get = async (url: string): Promise<Buffer> => {
      const response = await fetch(url);
      expect(response.status).toBe(200);
      return Buffer.from(await response.arrayBuffer());
    };
    return { kernel: await get(kernel![1]!), initrd: await get(initrd![1]!), cmdline: kernel![2]! };
  }

  it.each(["aarch64", "arm64"])("a node whose cpu_arch is %s boots the arm64 files", async (arch) => {
    const mac = "52:54:00:4a:4e:a1";
    await boot.prepareRamdisk(node(mac, { cpu_arch: arch }), { agentParams: {} });
    const got = await fetchBoot(mac);
    expect(got.kernel.equals(bytes.get("arm64/anvil.kernel")!)).toBe(true);
    expect(got.initrd.equals(bytes.get("arm64/anvil.initramfs")!)).toBe(true);
    expect(got.cmdline.split(" ")).toContain("console=ttyAMA0,115200");
  });

  it.each([{ cpu_arch: "x86_64" }, {}])(
    "a node with properties %j boots the default (x86) files",
    async (properties) => {
      const mac = "52:54:00:4a:4e:a2";
      await boot.prepareRamdisk(node(mac, properties), { agentParams: {} });
      const got = await fetchBoot(mac);
      expect(got.kernel.equals(bytes.get("x86/anvil.kernel")!)).toBe(true);
      expect(got.initrd.equals(bytes.get("x86/anvil.initramfs")!)).toBe(true);
      expect(got.cmdline.split(" ")).toContain("console=ttyS0,115200n8");
      expect(got.cmdline).not.toContain("ttyAMA0");
    },
  );
});
