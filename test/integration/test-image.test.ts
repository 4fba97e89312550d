import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exec } from "../../shared/system/exec.ts";
import { startQemu } from "../helpers/qemu.ts";
import type { QemuVm } from "../helpers/qemu.ts";

const ROOT = resolve(import.meta.dirname, "../..");
const ID = "image-under-test-1";
const INSTANCE_UUID = "1be1e0d6-5a5e-4b1e-9c0d-00000000a4a4";
const BOOT_TIMEOUT_MS = 180_000;
// Debian's ovmf package: UEFI firmware for QEMU.
const OVMF = "/usr/share/ovmf/OVMF.fd";
const PANIC = /Kernel panic/;

describe("the whole-disk test image", () => {
  let dir: string;
  let vm: QemuVm | undefined;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "anvil-test-image-"));
    const build = await exec("bash", ["images/test/build.sh", "--id", ID, "--out", dir], {
      cwd: ROOT,
      timeoutMs: 600_000,
    });
    expect(build.code, build.stderr).toBe(0);
  }, 600_000);

  afterAll(async () => {
    await vm?.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it(
    "boots from its disk alone, prints its marker on ttyS0 and powers the machine off",
    async () => {
      vm = await startQemu({
        memoryMb: 256,
        nics: [],
        boot: "disk",
        disks: [{ path: join(dir, `${ID}.raw`), format: "raw", bus: "virtio" }],
        extraArgs: ["-nic", "none", "-snapshot"],
      });
      const text = await vm.waitForSerial(/ANVIL-TEST-IMAGE-CONFIGDRIVE[^\n]*\n/, {
        timeoutMs: BOOT_TIMEOUT_MS,
        failOn: PANIC,
      });
      expect(text).toContain(`ANVIL-TEST-IMAGE-BOOTED ${ID}\r\n`);
      // The kernel came from the disk's own syslinux config, not from QEMU.
      expect(text).toMatch(/ANVIL-TEST-IMAGE-CMDLINE BOOT_IMAGE=\/vmlinuz console=ttyS0/);
      expect(text).toContain("ANVIL-TEST-IMAGE-CONFIGDRIVE none\r\n");
      const exit = await vm.exited;
      expect(exit instanceof Error ? exit.message : exit.code).toBe(0);
    },
    BOOT_TIMEOUT_MS,
  );

  it(
    "boots by UEFI too (OVMF firmware, syslinux.efi as the removable-media loader)",
    async () => {
      await vm?.stop();
      vm = await startQemu({
        memoryMb: 256,
        nics: [],
        boot: "disk",
        disks: [{ path: join(dir, `${ID}.raw`), format: "raw", bus: "virtio" }],
        extraArgs: ["-nic", "none", "-snapshot", "-bios", OVMF],
      });
      const text = await vm.waitForSerial(/ANVIL-TEST-IMAGE-CONFIGDRIVE[^\n]*\n/, {
        timeoutMs: BOOT_TIMEOUT_MS,
        failOn: PANIC,
      });
      expect(text).toContain(`ANVIL-TEST-IMAGE-BOOTED ${ID}\r\n`);
      // OVMF's boot manager says what it started: the disk, not the network or the DVD drive.
      expect(text).toMatch(/BdsDxe: starting Boot\d+ "UEFI Misc Device"/);
    },
    BOOT_TIMEOUT_MS,
  );

  it(
    "reports the config drive a deploy appended to its disk as a partition",
    async () => {
      await vm?.stop();
      // What a deploy does to a whole-disk image: a config-2 ISO in a new partition after the image.
      const disk = join(dir, "deployed.raw");
      const iso = join(dir, "configdrive.iso");
      const metadata = join(dir, "configdrive", "openstack", "latest");
      await mkdir(metadata, { recursive: true });
      await writeFile(
        join(metadata, "meta_data.json"),
        JSON.stringify({ uuid: INSTANCE_UUID, hostname: "node-1" }),
      );
      const steps: [string, string[]][] = [
        ["genisoimage", ["-quiet", "-o", iso, "-V", "config-2", "-r", "-J", join(dir, "configdrive")]],
        ["cp", [join(dir, `${ID}.raw`), disk]],
        ["truncate", ["-s", "40M", disk]],
        ["dd", [`if=${iso}`, `of=${disk}`, "bs=1M", "seek=32", "conv=notrunc", "status=none"]],
      ];
      for (const [command, args] of steps) {
        const result = await exec(command, args);
        expect(result.code, `${command}: ${result.stderr}`).toBe(0);
      }
      const partition = await exec("sfdisk", ["--append", "--quiet", disk], {
        input: "start=65536, type=83\n",
      });
      expect(partition.code, partition.stderr).toBe(0);

      vm = await startQemu({
        memoryMb: 256,
        nics: [],
        boot: "disk",
        disks: [{ path: disk, format: "raw", bus: "virtio" }],
        extraArgs: ["-nic", "none"],
      });
      const text = await vm.waitForSerial(/ANVIL-TEST-IMAGE-CONFIGDRIVE[^\n]*\n/, {
        timeoutMs: BOOT_TIMEOUT_MS,
        failOn: PANIC,
      });
      expect(text).toContain(`ANVIL-TEST-IMAGE-BOOTED ${ID}\r\n`);
      expect(text).toContain(`ANVIL-TEST-IMAGE-CONFIGDRIVE vda2 uuid=${INSTANCE_UUID}\r\n`);
    },
    BOOT_TIMEOUT_MS,
  );

  it("has an MBR with one bootable FAT16 partition at 1 MiB", async () => {
    const table = await exec("sfdisk", ["--json", join(dir, `${ID}.raw`)]);
    expect(table.code, table.stderr).toBe(0);
    const parsed = JSON.parse(table.stdout) as {
      partitiontable: { label: string; partitions: { start: number; type: string; bootable?: boolean }[] };
    };
    expect(parsed.partitiontable.label).toBe("dos");
    expect(parsed.partitiontable.partitions).toEqual([
      expect.objectContaining({ start: 2048, type: "e", bootable: true }),
    ]);
  });

  it.each(["qcow2", "compressed.qcow2"])(
    "has a %s with the same disk contents as the raw image",
    async (suffix) => {
      const info = await exec("qemu-img", ["info", "--output=json", join(dir, `${ID}.${suffix}`)]);
      expect((JSON.parse(info.stdout) as { format: string }).format).toBe("qcow2");
      const compare = await exec("qemu-img", [
        "compare",
        "-f",
        "raw",
        "-F",
        "qcow2",
        join(dir, `${ID}.raw`),
        join(dir, `${ID}.${suffix}`),
      ]);
      expect(compare.code, compare.stdout + compare.stderr).toBe(0);
    },
  );

  it("lists the checksums of all five files", async () => {
    const sums = await readFile(join(dir, `${ID}.sha256sums`), "utf8");
    const check = await exec("sha256sum", ["--check", "--strict", `${ID}.sha256sums`], { cwd: dir });
    expect(check.code, check.stdout + check.stderr).toBe(0);
    const names = sums
      .trim()
      .split("\n")
      .map((line) => line.split(/\s+/)[1]);
    expect(names).toEqual(
      ["raw", "qcow2", "compressed.qcow2", "partition.raw", "linux-disk.raw"].map((kind) => `${ID}.${kind}`),
    );
  });

  it("is reproducible: a second build elsewhere gives the same bytes", async () => {
    const again = join(dir, "again");
    const build = await exec("bash", ["images/test/build.sh", "--id", ID, "--out", again], {
      cwd: ROOT,
      timeoutMs: 600_000,
    });
    expect(build.code, build.stderr).toBe(0);
    const [first, second] = await Promise.all(
      [dir, again].map((out) => readFile(join(out, `${ID}.sha256sums`), "utf8")),
    );
    expect(second).toBe(first);
  }, 600_000);
});
