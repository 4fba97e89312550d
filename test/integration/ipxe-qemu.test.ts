import { copyFile, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Fastify from "fastify";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exec } from "../../shared/system/exec.ts";
import type { DriverNode } from "../../conductor/drivers/interfaces.ts";
import { IpxeBoot } from "../../conductor/drivers/boot/ipxe.ts";
import { bootFilesPlugin } from "../../conductor/drivers/boot/http-plugin.ts";
import { buildMarkerInitramfs, startQemu } from "../helpers/qemu.ts";
import type { QemuVm, UserNetwork } from "../helpers/qemu.ts";

const MAC = "52:54:00:a1:b2:c3";
const MARKER = "ANVIL-RAMDISK-UP";
// The guest reaches the host only through this forward (slirp restrict=on).
const GUEST_HTTP = "10.0.2.100";

/**
 * A disk whose MBR boot code writes a marker straight to COM1 and halts: proof that the BIOS booted it.
 * cli; cld; xor ax,ax; mov ds,ax; mov si,msg; mov dx,0x3f8; l: lodsb; test al,al; jz d; out dx,al; jmp l;
 * d: hlt; jmp d; msg: ...
 */
function bootSectorDisk(marker: string): Buffer {
  const code = [0xfa, 0xfc, 0x31, 0xc0, 0x8e, 0xd8, 0xbe, 0x17, 0x7c, 0xba, 0xf8, 0x03];
  code.push(0xac, 0x84, 0xc0, 0x74, 0x03, 0xee, 0xeb, 0xf8, 0xf4, 0xeb, 0xfd);
  const disk = Buffer.alloc(1024 * 1024);
  Buffer.from(code).copy(disk, 0);
  Buffer.from(`${marker}\r\n\0`, "latin1").copy(disk, code.length); // code.length === 0x17
  disk[510] = 0x55;
  disk[511] = 0xaa;
  return disk;
}

describe("iPXE in QEMU boots the deploy kernel from the conductor's boot root", () => {
  let dir: string;
  let app: FastifyInstance;
  let port: number;
  const requests: string[] = [];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "anvil-ipxe-qemu-"));
    const root = join(dir, "root");
    await mkdir(join(root, "images"), { recursive: true });
    const kernelDir = (await exec("bash", ["images/kernel/fetch.sh"], { timeoutMs: 600_000 })).stdout.trim();
    await copyFile(join(kernelDir, "vmlinuz"), join(root, "images", "vmlinuz"));
    await copyFile(await buildMarkerInitramfs(dir, MARKER), join(root, "images", "initramfs"));
    app = Fastify();
    app.addHook("onRequest", async (request) => {
      requests.push(request.url);
    });
    await app.register(bootFilesPlugin, { prefix: "/boot", root });
    await app.listen({ host: "127.0.0.1", port: 0 });
    port = (app.server.address() as { port: number }).port;
  });
  afterAll(async () => {
    await app?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const base = `http://${GUEST_HTTP}/boot`;
  const network = (): UserNetwork => ({
    kind: "user",
    mac: MAC,
    bootfile: `${base}/boot.ipxe`,
    restrict: { forwards: [{ guestIp: GUEST_HTTP, guestPort: 80, hostPort: port }] },
  });

  it("chains boot.ipxe -> nodes/<mac>.ipxe, and the kernel gets the conductor's parameters", async () => {
    const node: DriverNode = {
      uuid: "7d0e3c5a-1b2c-4d3e-8f90-a1b2c3d4e5f6",
      name: "qemu-node",
      driver_info: { deploy_kernel: `${base}/images/vmlinuz`, deploy_ramdisk: `${base}/images/initramfs` },
      properties: {},
      instance_info: {},
      driver_internal_info: {},
      ports: [{ address: MAC.toUpperCase(), pxe_enabled: true }],
    };
    const boot = new IpxeBoot({ root: join(dir, "root"), kernelArgs: ["console=ttyS0", "panic=-1"] });
    await boot.prepareRamdisk(node, {
      agentParams: { "anvil.conductor": "ws://10.0.2.100/v1/agent", "anvil.node": node.uuid },
    });

    let vm: QemuVm | undefined;
    try {
      vm = await startQemu({
        memoryMb: 512,
        boot: "network",
        nics: [network()],
        timeoutMs: 240_000,
      });
      const started = Date.now();
      const serial = await vm.waitForSerial(/CMDLINE: [^\r\n]*\r?\n/, {
        timeoutMs: 220_000,
        failOn: /No bootable device|Kernel panic/,
      });
      console.log(`QEMU (TCG): power on to ramdisk init in ${((Date.now() - started) / 1000).toFixed(1)} s`);
      expect(serial).toContain(MARKER);
      const cmdline = /CMDLINE: (.*)/.exec(serial)?.[1] ?? "";
      expect(cmdline.split(" ")).toEqual(
        expect.arrayContaining([
          "console=ttyS0",
          "anvil.conductor=ws://10.0.2.100/v1/agent",
          `anvil.node=${node.uuid}`,
          "BOOTIF=01-52-54-00-a1-b2-c3",
        ]),
      );
      expect(requests).toEqual(
        expect.arrayContaining([
          "/boot/boot.ipxe",
          "/boot/nodes/52-54-00-a1-b2-c3.ipxe",
          "/boot/images/vmlinuz",
          "/boot/images/initramfs",
        ]),
      );
    } finally {
      await vm?.stop();
    }
  }, 300_000);

  it("after prepareInstance, a node that still network-boots first boots its local disk", async () => {
    const node: DriverNode = {
      uuid: "7d0e3c5a-1b2c-4d3e-8f90-a1b2c3d4e5f6",
      name: "qemu-node",
      driver_info: {},
      properties: {},
      instance_info: {},
      driver_internal_info: {},
      ports: [{ address: MAC, pxe_enabled: true }],
    };
    await new IpxeBoot({ root: join(dir, "root") }).prepareInstance(node);
    const disk = join(dir, "disk.img");
    await writeFile(disk, bootSectorDisk("ANVIL-LOCAL-DISK-BOOTED"));
    const before = requests.length;
    let vm: QemuVm | undefined;
    try {
      vm = await startQemu({
        boot: "network",
        nics: [network()],
        disks: [{ path: disk, format: "raw" }],
        timeoutMs: 240_000,
      });
      const serial = await vm.waitForSerial(/ANVIL-LOCAL-DISK-BOOTED/, {
        timeoutMs: 220_000,
        failOn: /No bootable device/,
      });
      // iPXE handed over to BIOS drive 0x80 (the last characters may be cut by our unbuffered writes).
      expect(serial).toContain("Booting from SAN device 0x8");
      expect(requests.slice(before)).toEqual(["/boot/boot.ipxe", "/boot/nodes/52-54-00-a1-b2-c3.ipxe"]);
    } finally {
      await vm?.stop();
    }
  }, 300_000);
});
