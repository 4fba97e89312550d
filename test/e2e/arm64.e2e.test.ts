import { createHash } from "node:crypto";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exec } from "../../shared/system/exec.ts";
import { InventorySchema } from "../../shared/inventory.ts";
import { loadConfig } from "../../conductor/config-loader.ts";
import { httpBootRoot, ipmiHardware } from "../../conductor/drivers/registry.ts";
import { ROOT } from "../helpers/agent.ts";
import { FakeConductor } from "../helpers/fake-conductor.ts";
import { documentedModules } from "../helpers/ramdisk-drivers.ts";
import { startQemu } from "../helpers/qemu.ts";
import type { QemuVm } from "../helpers/qemu.ts";
import { waitFor } from "../helpers/wait.ts";

// The arm64 deploy ramdisk and agent (Debian's arm64 kernel and packages, the official arm64 Node with the
// agent's SEA blob), picked by the conductor's boot interface for a node whose cpu_arch is aarch64, booted
// under qemu-system-aarch64's virt machine (TCG) until the agent says hello.
// NOTE: QEMU's arm64 virt machine has no iPXE without EFI firmware (qemu-efi-aarch64 and an arm64 iPXE
// build): the VM boots the kernel and initramfs directly, but the very files and kernel command line the
// iPXE script the conductor wrote for the node names, fetched over HTTP by its URLs.
const ARM64 = join(ROOT, "build/arm64");
const X86 = join(ROOT, "build/ramdisk");
const MAC = "52:54:00:4a:4e:a6";
const NODE_UUID = "6a1c9d0e-2b7f-4e31-8c5a-00000000a64a";
// TCG emulating arm64 on x86 is slower than emulating x86: the 45 MB initramfs alone unpacks for ~40 s.
const BOOT_TIMEOUT_MS = 600_000;
const PANIC = /Kernel panic/;

const sha256 = async (path: string): Promise<string> =>
  createHash("sha256")
    .update(await readFile(path))
    .digest("hex");

/** Builds what is stale: the arm64 agent (its own staleness check), then the ramdisk (cached by content). */
async function buildArm64(): Promise<void> {
  await mkdir(ARM64, { recursive: true });
  const agent = await exec(
    "flock",
    [
      join(ARM64, ".anvil-agent.lock"),
      process.execPath,
      "--import",
      "tsx",
      "scripts/build/agent.ts",
      "--if-stale",
      "--arch",
      "arm64",
      "--out",
      join(ARM64, "anvil-agent"),
    ],
    { cwd: ROOT, timeoutMs: 600_000, env: { HOME: process.env.HOME ?? "/root" } },
  );
  expect(agent.code, agent.stderr).toBe(0);
  const ramdisk = await exec("bash", ["images/ramdisk/build.sh", "--arch", "arm64"], {
    cwd: ROOT,
    timeoutMs: 900_000,
  });
  expect(ramdisk.code, ramdisk.stderr).toBe(0);
  console.log(ramdisk.stdout.trim());
}

/** The iPXE script's kernel line: the kernel URL, then the command line. */
function kernelLine(script: string): { url: string; words: string[] } {
  const line = /^kernel (\S+) (.*) \|\| goto failed$/m.exec(script);
  expect(line, script).not.toBeNull();
  return { url: line![1]!, words: line![2]!.split(" ") };
}

/** Fetches a boot file by the URL the guest would use (10.0.2.2 is the host's loopback under slirp). */
async function download(url: string, path: string): Promise<string> {
  const response = await fetch(url.replace("//10.0.2.2:", "//127.0.0.1:"));
  expect(response.status).toBe(200);
  await writeFile(path, Buffer.from(await response.arrayBuffer()));
  return path;
}

describe("the arm64 deploy ramdisk, chosen by the node's cpu_arch, reaches hello under QEMU aarch64 (TCG)", () => {
  let dir: string;
  let conductor: FakeConductor;
  let vm: QemuVm | undefined;
  let vmStarted = 0;
  let script = "";

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "anvil-arm64-e2e-"));
    await buildArm64();
    conductor = await FakeConductor.start();
    // The conductor as an operator would configure it: Ironic's per-architecture deploy images.
    const url = (name: string, file: string): string => conductor.serve(name, file);
    const config = loadConfig({
      argv: [
        "--data-dir",
        join(dir, "conductor"),
        "--deploy-kernel-by-arch",
        `x86_64:${url("x86.kernel", join(X86, "anvil.kernel"))},aarch64:${url("arm64.kernel", join(ARM64, "anvil.kernel"))}`,
        "--deploy-ramdisk-by-arch",
        `x86_64:${url("x86.initramfs", join(X86, "anvil.initramfs"))},aarch64:${url("arm64.initramfs", join(ARM64, "anvil.initramfs"))}`,
      ],
      env: {},
    }).config;
    const boot = ipmiHardware(config).boot;
    await boot.prepareRamdisk(
      {
        uuid: NODE_UUID,
        name: "arm-1",
        driver_info: {},
        // what inspection records from the agent's inventory on an arm64 machine
        properties: { cpu_arch: "aarch64" },
        instance_info: {},
        driver_internal_info: {},
        ports: [{ address: MAC, pxe_enabled: true }],
      },
      { agentParams: { "anvil.conductor": `ws://10.0.2.2:${conductor.port}/v1/agent` } },
    );
    script = await readFile(join(httpBootRoot(config), "nodes", `${MAC.replaceAll(":", "-")}.ipxe`), "utf8");
  }, 1_800_000);

  afterAll(async () => {
    await vm?.stop();
    await conductor?.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it(
    "boots the arm64 files the node's iPXE script names, and the agent says hello",
    async () => {
      const kernel = kernelLine(script);
      const initrd = /^initrd (\S+) \|\| goto failed$/m.exec(script)?.[1] ?? "";
      expect(kernel.url).toMatch(/\/files\/arm64\.kernel$/);
      expect(initrd).toMatch(/\/files\/arm64\.initramfs$/);
      expect(kernel.words).toContain("console=ttyAMA0,115200");
      const files = {
        kernel: await download(kernel.url, join(dir, "kernel")),
        initrd: await download(initrd, join(dir, "initrd")),
      };
      expect(await sha256(files.kernel)).toBe(await sha256(join(ARM64, "anvil.kernel")));
      expect(await sha256(files.initrd)).toBe(await sha256(join(ARM64, "anvil.initramfs")));
      // an arm64 Linux Image: its header's magic, "ARM\x64", at byte 56
      expect((await readFile(files.kernel)).subarray(56, 60).toString("latin1")).toBe("ARM\x64");

      const disk = await exec("truncate", ["-s", String(64 * 1024 * 1024), join(dir, "disk.raw")]);
      expect(disk.code).toBe(0);
      vm = await startQemu({
        machine: "virt",
        memoryMb: 1024,
        nics: [{ kind: "user", mac: MAC }],
        disks: [{ path: join(dir, "disk.raw"), format: "raw", serial: "ANVIL-ARM64-1", bus: "virtio" }],
        boot: { kernel: files.kernel, initrd: files.initrd, append: kernel.words.join(" ") },
        timeoutMs: BOOT_TIMEOUT_MS + 120_000,
      });
      vmStarted = Date.now();
      await waitFor(() => conductor.frames.some((frame) => frame.type === "hello"), {
        timeoutMs: BOOT_TIMEOUT_MS,
        intervalMs: 500,
      });
      const helloS = ((Date.now() - vmStarted) / 1000).toFixed(1);
      const serial = await vm.readSerial();
      expect(serial).not.toMatch(PANIC);
      const uptime = /starting agent \(up ([0-9.]+)s\)/.exec(serial)?.[1];
      const initAt = /anvil-init: kernel \S+ up ([0-9.]+)s/.exec(serial)?.[1];
      // Measured, not asserted (tests never fail on time).
      console.log(
        `arm64 ramdisk under QEMU aarch64 TCG: hello ${helloS} s after QEMU started; /init at guest uptime ${initAt} s, agent started at ${uptime} s`,
      );
      expect(conductor.frames[0]).toMatchObject({
        type: "hello",
        macs: expect.arrayContaining([MAC]) as unknown,
      });
      // every module the arm64 list names loaded, in its order
      const loaded = /anvil-init: modules loaded:([^\r\n]*)/.exec(serial)?.[1]?.trim().split(" ") ?? [];
      const markdown = await readFile(join(ROOT, "images/ramdisk/drivers-arm64.md"), "utf8");
      expect(loaded.slice(0, documentedModules(markdown).length)).toEqual(documentedModules(markdown));
      expect(serial).not.toContain("modules that failed to load");
    },
    BOOT_TIMEOUT_MS + 120_000,
  );

  it("the agent's inventory, taken inside the arm64 ramdisk, says aarch64 and finds the virtio disk", async () => {
    const result = await conductor.call("get_inventory", {}, 300_000);
    expect(result).toMatchObject({ ok: true });
    const inventory = InventorySchema.parse(result.ok ? result.value : null);
    expect(inventory.cpu.architecture).toBe("aarch64");
    expect(inventory.disks.map((disk) => disk.serial)).toContain("ANVIL-ARM64-1");
    expect(inventory.interfaces.find((nic) => nic.mac_address === MAC)?.driver).toBe("virtio_net");
  }, 300_000);
});
