import { existsSync } from "node:fs";
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Fastify, { type FastifyInstance } from "fastify";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { DriverNode } from "../../conductor/drivers/interfaces.ts";
import { RedfishVirtualMediaBoot } from "../../conductor/drivers/redfish/boot.ts";
import { RedfishConnections } from "../../conductor/drivers/redfish/client.ts";
import { registerImageRoutes } from "../../conductor/images/image-routes.ts";
import { DeployFiles } from "../../conductor/images/iso-sources.ts";
import { VMEDIA_VOLUME_ID, VmediaIsoBuilder } from "../../conductor/images/iso.ts";
import { ImageLinks, LINK_PARAMS } from "../../conductor/images/signed-links.ts";
import { exec } from "../../shared/system/exec.ts";
import { MemoryMachine } from "../../scripts/lab/redfish/machine.ts";
import { startRedfishBmc, type RedfishBmc } from "../../scripts/lab/redfish/server.ts";

const NETWORK_DATA = {
  links: [{ id: "eth0", type: "phy", ethernet_mac_address: "52:54:00:aa:00:01" }],
  networks: [
    {
      id: "net0",
      type: "ipv4",
      link: "eth0",
      ip_address: "192.0.2.10",
      netmask: "255.255.255.0",
      routes: [{ network: "0.0.0.0", netmask: "0.0.0.0", gateway: "192.0.2.1" }],
    },
  ],
  services: [{ type: "dns", address: "192.0.2.1" }],
};

/** A file from the ISO (Rock Ridge names), read by genisoimage's isoinfo. */
async function isoFile(iso: string, path: string): Promise<string> {
  const result = await exec("isoinfo", ["-R", "-i", iso, "-x", path], { timeoutMs: 30_000 });
  return result.stdout;
}

let dir: string;
let kernel: string;
let ramdisk: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "anvil-vmedia-"));
  kernel = join(dir, "kernel");
  ramdisk = join(dir, "ramdisk");
  await writeFile(kernel, "not a kernel, but grub-mkrescue only copies it\n");
  await writeFile(ramdisk, Buffer.alloc(64 * 1024, 7));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("the virtual-media ISO builder", () => {
  it("builds a labelled ISO with the kernel, initramfs, network data and the vmedia command line", async () => {
    const isos = new VmediaIsoBuilder({ dir: join(dir, "isos-1") });
    const iso = await isos.acquire("n1", {
      kernel,
      ramdisk,
      kernelWords: [
        "console=ttyS0",
        "anvil.conductor=ws://192.0.2.1:6385/v1/agent",
        "anvil.netconfig=vmedia",
      ],
      networkData: NETWORK_DATA,
    });
    expect(iso.built).toBe(true);
    const info = await exec("isoinfo", ["-d", "-i", iso.path], { timeoutMs: 30_000 });
    expect(info.stdout).toMatch(new RegExp(`Volume id: ${VMEDIA_VOLUME_ID}\\n`));
    // both firmware kinds: an El Torito BIOS image and an EFI one
    expect(info.stdout).toMatch(/El Torito/);
    expect(JSON.parse(await isoFile(iso.path, "/openstack/latest/network_data.json"))).toEqual(NETWORK_DATA);
    const grub = await isoFile(iso.path, "/boot/grub/grub.cfg");
    expect(grub).toMatch(/linux \/anvil\/kernel .*anvil\.conductor=ws:\/\/192\.0\.2\.1:6385\/v1\/agent/);
    expect(grub).toMatch(/anvil\.netconfig=vmedia/);
    expect(await isoFile(iso.path, "/anvil/kernel")).toBe("not a kernel, but grub-mkrescue only copies it\n");
    const efi = await exec("xorriso", ["-indev", iso.path, "-report_el_torito", "plain"], {
      timeoutMs: 30_000,
    });
    expect(`${efi.stdout}${efi.stderr}`).toMatch(/UEFI/);
  });

  it("builds one ISO for the same content and deletes it when the last holder releases it", async () => {
    const isos = new VmediaIsoBuilder({ dir: join(dir, "isos-2") });
    const content = { kernel, ramdisk, kernelWords: ["quiet"], networkData: null };
    const [a, b] = await Promise.all([isos.acquire("n1", content), isos.acquire("n2", content)]);
    expect(a.name).toBe(b.name);
    const again = await isos.acquire("n3", content);
    expect(again).toMatchObject({ name: a.name, built: false, ms: 0 });
    const other = await isos.acquire("n4", { ...content, networkData: NETWORK_DATA });
    expect(other.name).not.toBe(a.name);
    await isos.release("n1", a.name);
    await isos.release("n2", a.name);
    expect(existsSync(a.path)).toBe(true);
    await isos.release("n3", a.name);
    expect(existsSync(a.path)).toBe(false);
    expect((await readdir(isos.dir)).filter((n) => n.startsWith(".build-"))).toEqual([]);
  });
});

describe("the redfish-virtual-media boot interface against the lab's in-memory BMC", () => {
  let app: FastifyInstance;
  let base: string;
  let links: ImageLinks;
  const bmcs: RedfishBmc[] = [];
  const connections: RedfishConnections[] = [];

  beforeAll(async () => {
    links = new ImageLinks();
    await links.load({ sharedSecret: (_name, candidate) => Promise.resolve(candidate) });
    app = Fastify();
    registerImageRoutes(app, { links, vmediaDir: join(dir, "served") });
    await import("node:fs/promises").then((fs) => fs.mkdir(join(dir, "served"), { recursive: true }));
    base = await app.listen({ host: "127.0.0.1", port: 0 });
  });
  afterAll(async () => {
    await app.close();
  });
  afterEach(async () => {
    for (const c of connections.splice(0)) await c.close();
    for (const b of bmcs.splice(0)) await b.stop();
  });

  async function setup() {
    const bmc = await startRedfishBmc({
      password: "pw",
      systems: [
        { id: "other", machine: new MemoryMachine() },
        { id: "node-1", machine: new MemoryMachine(), macs: ["52:54:00:aa:00:01"] },
      ],
    });
    bmcs.push(bmc);
    const conn = new RedfishConnections({ backoffMs: 1, timeoutMs: 5000 });
    connections.push(conn);
    const isos = new VmediaIsoBuilder({ dir: join(dir, "served") });
    const boot = new RedfishVirtualMediaBoot({
      connections: conn,
      isos,
      files: new DeployFiles({ dir: join(dir, "sources") }),
      signedUrl: (path) => `${base}${links.sign(path, 600)}`,
      defaultDeployImages: { kernel, ramdisk: `file://${ramdisk}` },
    });
    const node: DriverNode = {
      uuid: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123",
      name: "n1",
      driver_info: {
        redfish_address: bmc.url,
        redfish_system_id: "/redfish/v1/Systems/node-1",
        redfish_username: "admin",
        redfish_password: "pw",
      },
      properties: {},
      instance_info: {},
      driver_internal_info: {},
      ports: [{ address: "52:54:00:aa:00:01", pxe_enabled: true }],
      boot_interface: "redfish-virtual-media",
      network_data: NETWORK_DATA,
    };
    return { bmc, boot, node, isos };
  }

  it("inserts a signed link to the node's ISO into that system's CD, ejecting what was there", async () => {
    const { bmc, boot, node } = await setup();
    const slot = bmc.systems.get("node-1")!;
    slot.media = { image: "http://old.example/stale.iso", inserted: true, writeProtected: true };
    await boot.prepareRamdisk(node, { agentParams: { "anvil.conductor": "ws://127.0.0.1:1/v1/agent" } });
    expect(boot.ramdiskBootDevice()).toBe("cdrom");
    expect(bmc.requests).toContain(
      "POST /redfish/v1/Managers/BMC/VirtualMedia/node-1/Actions/VirtualMedia.EjectMedia",
    );
    expect(bmc.systems.get("other")!.media.inserted).toBe(false);
    const image = slot.media.image!;
    expect(slot.media.inserted).toBe(true);
    expect(image.startsWith(`${base}/vmedia/vmedia-`)).toBe(true);
    const served = await fetch(image);
    expect(served.status).toBe(200);
    const bytes = Buffer.from(await served.arrayBuffer());
    // an ISO 9660 primary volume descriptor at sector 16, naming the volume the ramdisk looks for
    expect(bytes.subarray(32769, 32774).toString("latin1")).toBe("CD001");
    expect(bytes.subarray(32808, 32808 + 12).toString("latin1")).toBe("ANVIL_VMEDIA");
    // a link with another signature or another file does not verify
    const url = new URL(image);
    const sig = url.searchParams.get(LINK_PARAMS.signature)!;
    url.searchParams.set(LINK_PARAMS.signature, `${sig[0] === "A" ? "B" : "A"}${sig.slice(1)}`);
    expect((await fetch(url)).status).toBe(403);
    const other = new URL(image);
    other.pathname = other.pathname.replace(/vmedia-[0-9a-f]/, "vmedia-x");
    expect((await fetch(other)).status).toBe(403);
    expect((await fetch(`${base}${new URL(image).pathname}`)).status).toBe(403);
  });

  it("ejects and deletes the ISO on clean-up, and clean-up twice is harmless", async () => {
    const { bmc, boot, node, isos } = await setup();
    await boot.prepareRamdisk(node, { agentParams: {} });
    const slot = bmc.systems.get("node-1")!;
    const name = /vmedia-[0-9a-f]{32}\.iso/.exec(slot.media.image!)![0];
    expect(existsSync(join(isos.dir, name))).toBe(true);
    await boot.cleanUpRamdisk(node);
    expect(slot.media).toMatchObject({ image: null, inserted: false });
    expect(existsSync(join(isos.dir, name))).toBe(false);
    await boot.cleanUpRamdisk(node);
  });

  it("finds the ISO to delete from the slot after a restart forgot it", async () => {
    const { bmc, boot, node, isos } = await setup();
    await boot.prepareRamdisk(node, { agentParams: {} });
    const name = /vmedia-[0-9a-f]{32}\.iso/.exec(bmc.systems.get("node-1")!.media.image!)![0];
    const restarted = new RedfishVirtualMediaBoot({
      connections: connections[0]!,
      isos: new VmediaIsoBuilder({ dir: isos.dir }),
      files: new DeployFiles({ dir: join(dir, "sources") }),
      signedUrl: (path) => `${base}${links.sign(path, 600)}`,
    });
    await restarted.cleanUpRamdisk(node);
    expect(existsSync(join(isos.dir, name))).toBe(false);
  });

  it("reports a refused insert in Ironic's words, without the link's signature", async () => {
    const { bmc, boot, node } = await setup();
    bmc.misbehave.refuseInsertMedia = "Unable to fetch the image";
    const failure = boot.prepareRamdisk(node, { agentParams: {} });
    await expect(failure).rejects.toThrow(
      new RegExp(
        `^Virtual media mount failed for node ${node.uuid} with image ${base}/vmedia/vmedia-[0-9a-f]{32}\\.iso\\?…\\. Error: .*Unable to fetch the image`,
      ),
    );
    await expect(failure).rejects.not.toThrow(/anvil_sig/);
  });

  it("fails with a clear message when the deploy ramdisk cannot be read", async () => {
    const { boot, node } = await setup();
    const missing = {
      ...node,
      driver_info: { ...node.driver_info, deploy_ramdisk: "file:///nonexistent/initrd" },
    };
    await expect(boot.prepareRamdisk(missing, { agentParams: {} })).rejects.toThrow(
      /^Failed to prepare the virtual media ISO for node .*: deploy image \/nonexistent\/initrd is not a readable file/,
    );
  });
});
