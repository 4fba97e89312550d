import { randomBytes } from "node:crypto";
import { chmod, copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { nvmeErase } from "../../agent/disk/erase/nvme.ts";
import { selectErase } from "../../agent/disk/erase/select.ts";
import type { DiskCapabilities, DiskTools } from "../../agent/hardware/disk-tools.ts";
import { parseNvmeIdentify } from "../../agent/hardware/linux/nvme-identify.ts";
import { EraseOptionsSchema } from "../../shared/erase.ts";
import { blankDisk } from "../../shared/inventory.ts";
import type { ExecResult } from "../../shared/system/exec.ts";
import { ROOT } from "../helpers/agent.ts";
import { startQemu } from "../helpers/qemu.ts";
import { runOk } from "../helpers/run.ts";

const MiB = 1024 * 1024;
const DISK = 64 * MiB;
const DEVICE = "/dev/nvme0n1";
const MODULES = ["crct10dif_common", "crc64", "crc-t10dif", "crc64-rocksoft", "t10-pi", "nvme-core", "nvme"];

/** The nvme-cli argv the agent's NVMe module issues for a method (a recording port; nothing runs). */
async function argvFor(caps: DiskCapabilities): Promise<string[]> {
  const plan = selectErase(caps, { mode: "full", options: EraseOptionsSchema.parse({}) });
  if (plan.action !== "erase") throw new Error(`no erase planned: ${JSON.stringify(plan)}`);
  const method = plan.attempts[0]?.method;
  if (method === undefined || !method.startsWith("nvme_")) throw new Error(`not an NVMe method: ${method}`);
  const calls: string[][] = [];
  const ok: ExecResult = {
    code: 0,
    signal: null,
    stdout: JSON.stringify({ sprog: 65535, sstat: 1 }),
    stderr: "",
  };
  const recorder: DiskTools = {
    capabilities: async () => caps,
    discard: async () => undefined,
    hdparm: async () => ok,
    smartctl: async () => ok,
    nvme: async (args) => (calls.push([...args]), ok),
  };
  await nvmeErase(DEVICE, method as Parameters<typeof nvmeErase>[1], {
    tools: recorder,
    lbaf: caps.nvme?.lbaf ?? null,
    pollMs: 1,
  });
  return calls[0] ?? [];
}

/** busybox, nvme-cli with its libraries and the NVMe driver, and an init that runs `script` and powers off. */
async function buildInitramfs(dir: string, script: string[]): Promise<{ kernel: string; initrd: string }> {
  const kernelDir = (
    await runOk("bash", [join(ROOT, "images/kernel/fetch.sh")], { timeoutMs: 600_000 })
  ).trim();
  const version = (await readFile(join(kernelDir, "version"), "utf8")).trim();
  const stage = join(dir, "stage");
  for (const sub of ["usr/bin", "usr/lib", "usr/lib64", "dev", "proc", "sys"])
    await mkdir(join(stage, sub), { recursive: true });
  await runOk("ln", ["-s", "usr/bin", join(stage, "bin")]);
  await runOk("ln", ["-s", "usr/lib", join(stage, "lib")]);
  await runOk("ln", ["-s", "usr/lib64", join(stage, "lib64")]);
  const copyWithLibraries = async (binary: string, dest: string): Promise<void> => {
    await copyFile(binary, join(stage, dest));
    await chmod(join(stage, dest), 0o755);
    const ldd = await runOk("sh", ["-c", 'ldd "$1" || true', "sh", binary]);
    for (const lib of ldd.matchAll(/(?:=> )?(\/\S+) \(0x/g)) {
      const path = lib[1] as string;
      await mkdir(join(stage, path, ".."), { recursive: true });
      await copyFile(await runOk("realpath", [path]).then((p) => p.trim()), join(stage, path));
    }
  };
  await copyWithLibraries("/bin/busybox", "usr/bin/busybox");
  await copyWithLibraries((await runOk("sh", ["-c", "command -v nvme"])).trim(), "usr/bin/nvme");
  for (const module of MODULES) {
    const found = (await runOk("find", [join(kernelDir, "lib/modules", version), "-name", `${module}.ko`]))
      .trim()
      .split("\n")[0];
    if (!found) throw new Error(`module ${module} not in ${kernelDir}`);
    await copyFile(found, join(stage, `${module}.ko`));
  }
  const init = [
    "#!/bin/busybox sh",
    "/bin/busybox --install -s /bin",
    "mount -t devtmpfs dev /dev; mount -t proc proc /proc; mount -t sysfs sys /sys",
    "exec >/dev/console 2>&1",
    ...MODULES.map((module) => `insmod /${module}.ko`),
    "for i in 1 2 3 4 5 6 7 8 9 10; do [ -b /dev/nvme0n1 ] && break; sleep 1; done",
    ...script,
    "poweroff -f",
    "",
  ].join("\n");
  await writeFile(join(stage, "init"), init, { mode: 0o755 });
  const initrd = join(dir, "initramfs.cpio");
  await runOk("sh", ["-c", 'cd "$1" && find . | cpio -o -H newc --quiet > "$2"', "sh", stage, initrd]);
  return { kernel: join(kernelDir, "vmlinuz"), initrd };
}

/** Real nvme-cli against QEMU's emulated NVMe controller, in a VM: the commands the agent would run. */
describe("NVMe erase on QEMU's emulated NVMe", () => {
  let dir: string;

  beforeAll(async () => {
    await mkdir(join(ROOT, ".tmp"), { recursive: true });
    dir = await mkdtemp(join(ROOT, ".tmp/erase-nvme-"));
  });
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("identify data parse to a format erase; the agent's nvme format argv removes a written pattern", async () => {
    // The argv comes from the recorded identify data of this QEMU version; the VM's own output is checked
    // against it below, so a QEMU that answers differently fails here rather than passing by accident.
    const recorded = parseNvmeIdentify(
      await readFile(join(ROOT, "test/fixtures/erase/nvme-id-ctrl-qemu-7.2.json"), "utf8"),
      await readFile(join(ROOT, "test/fixtures/erase/nvme-id-ns-qemu-7.2.json"), "utf8"),
    );
    const caps = (nvme: DiskCapabilities["nvme"]): DiskCapabilities => ({
      disk: blankDisk(DEVICE, DISK),
      kind: "block",
      readOnly: false,
      raidArray: false,
      raidMember: false,
      discard: { supported: true, zeroes: nvme?.deallocatedReadZero ?? false },
      writeZeroes: true,
      nvme,
      ata: null,
    });
    const argv = await argvFor(caps(recorded));
    expect(argv).toEqual(["format", DEVICE, "--ses=1", "--force", "--lbaf=0"]);

    const image = join(dir, "nvme.img");
    const pattern = randomBytes(DISK);
    await writeFile(image, pattern);
    const boot = await buildInitramfs(dir, [
      'echo "=== id-ctrl"; nvme id-ctrl /dev/nvme0n1 -o json; echo "=== id-ns"; nvme id-ns /dev/nvme0n1 -o json',
      `echo "=== erase"; nvme ${argv.join(" ")}; echo "=== rc=$?"`,
    ]);
    const vm = await startQemu({
      nics: [],
      boot: { kernel: boot.kernel, initrd: boot.initrd, append: "console=ttyS0 panic=-1" },
      disks: [{ path: image, format: "raw", bus: "nvme", serial: "ANVILNVME01" }],
      extraArgs: ["-net", "none"],
      timeoutMs: 240_000,
    });
    try {
      const log = await vm.waitForSerial(/=== rc=\d+/, { timeoutMs: 200_000 });
      const json = (from: string, to: string): string =>
        log
          .slice(log.indexOf(from) + from.length, log.indexOf(to))
          .split("\n")
          .filter((line) => !/^\[\s*\d+\.\d+\]/.test(line))
          .join("\n");
      expect(parseNvmeIdentify(json("=== id-ctrl", "=== id-ns"), json("=== id-ns", "=== erase"))).toEqual(
        recorded,
      );
      expect(log).toMatch(/=== rc=0/);
      await vm.exited;
    } finally {
      await vm.stop();
    }
    const after = await readFile(image);
    for (const offset of [0, DISK / 2, DISK - MiB]) {
      expect(after.subarray(offset, offset + 4096).equals(pattern.subarray(offset, offset + 4096))).toBe(
        false,
      );
    }
  }, 600_000);
});
