import { existsSync } from "node:fs";
import { mkdtemp, readdir, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exec } from "../../shared/system/exec.ts";
import type { ExecResult } from "../../shared/system/exec.ts";
import { ensureAgentBuilt } from "../helpers/agent.ts";

const ROOT = resolve(import.meta.dirname, "../..");
const STAND_IN = join(ROOT, "images/ramdisk/stand-in-agent.sh");
const BUILD_TIMEOUT_MS = 900_000;

async function buildRamdisk(options: { agent: string; out: string; noCache?: boolean }): Promise<ExecResult> {
  const args = ["images/ramdisk/build.sh", "--agent", options.agent, "--out", options.out];
  if (options.noCache === true) args.push("--no-cache");
  return exec("bash", args, { cwd: ROOT, timeoutMs: BUILD_TIMEOUT_MS });
}

/** Runs a program inside the unpacked ramdisk (a user namespace makes chroot work without root). */
async function runInRamdisk(root: string, argv: string[]): Promise<ExecResult> {
  const chroot = ["chroot", root, ...argv];
  return process.getuid?.() === 0
    ? exec(chroot[0]!, chroot.slice(1), { timeoutMs: 30_000 })
    : exec("unshare", ["--map-root-user", ...chroot], { timeoutMs: 30_000 });
}

describe("the deploy ramdisk's contents (unpacked on the host)", () => {
  let dir: string;
  let unpacked: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "anvil-ramdisk-contents-"));
    const build = await buildRamdisk({ agent: await ensureAgentBuilt(), out: dir });
    expect(build.code, build.stderr).toBe(0);
    unpacked = join(dir, "root");
    const unpack = await exec("bash", [
      "-c",
      'set -e -o pipefail; mkdir -p "$2"; zstd -dc "$1" | (cd "$2" && cpio -idm --quiet)',
      "unpack",
      join(dir, "anvil.initramfs"),
      unpacked,
    ]);
    expect(unpack.code, unpack.stderr).toBe(0);
  }, BUILD_TIMEOUT_MS);

  afterAll(async () => {
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it("is under the 60 MB goal, compressed", async () => {
    expect((await stat(join(dir, "anvil.initramfs"))).size).toBeLessThanOrEqual(60_000_000);
  });

  it.each([
    ["lsblk", "--version"],
    ["blkid", "--version"],
    ["wipefs", "--version"],
    ["blkdiscard", "--version"],
    ["sfdisk", "--version"],
    ["mdadm", "--version"],
    ["sgdisk", "--version"],
    ["nvme", "version"],
    ["hdparm", "-V"],
    ["smartctl", "--version"],
    ["dmidecode", "--version"],
    ["grub-install", "--version"],
    ["mkfs.fat", "--help"],
  ])("runs %s with the libraries it carries", async (tool, flag) => {
    // Found the way init's PATH finds it. NOTE: not through busybox sh, which prefers its own applets.
    const path = ["/usr/sbin", "/usr/bin"]
      .map((bin) => `${bin}/${tool}`)
      .find((p) => existsSync(join(unpacked, p)));
    expect(path, tool).toBeDefined();
    const result = await runInRamdisk(unpacked, [path!, flag]);
    expect(result.stderr).not.toMatch(/error while loading shared libraries/);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout + result.stderr).not.toContain("BusyBox");
  });

  it("runs the agent executable", async () => {
    const result = await runInRamdisk(unpacked, ["/usr/bin/anvil-agent", "--version"]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/^\d+\.\d+\.\d+/);
  });

  it("carries GRUB's BIOS and UEFI platform files for grub-install, without the monolithic EFI images", () => {
    for (const file of [
      "i386-pc/boot.img",
      "i386-pc/mdraid1x.mod",
      "x86_64-efi/kernel.img",
      "x86_64-efi/mdraid1x.mod",
    ]) {
      expect(existsSync(join(unpacked, "usr/lib/grub", file)), file).toBe(true);
    }
    expect(existsSync(join(unpacked, "usr/lib/grub/x86_64-efi/monolithic"))).toBe(false);
  });

  it("takes real tools over busybox applets of the same name", async () => {
    const tools = ["ip", "lsblk", "blkid", "wipefs", "blkdiscard", "sfdisk", "partx"];
    const script = `for t in ${tools.join(" ")}; do for d in /usr/bin /usr/sbin; do [ -L $d/$t ] && echo "$d/$t"; done; done; true`;
    const result = await runInRamdisk(unpacked, ["/bin/sh", "-c", script]);
    expect(result.code).toBe(0);
    expect(result.stdout.trim()).toBe("");
  });

  it("carries every listed module and their dependencies, with a modules.dep for busybox modprobe", async () => {
    const versions = await readdir(join(unpacked, "lib/modules"));
    expect(versions).toHaveLength(1);
    const version = versions[0]!;
    const modulesDep = await readFile(join(unpacked, "lib/modules", version, "modules.dep"), "utf8");
    const listed = (await readFile(join(unpacked, "etc/anvil/modules"), "utf8")).trim().split("\n");
    expect(listed.indexOf("crc32c_generic")).toBeLessThan(listed.indexOf("raid456"));
    for (const line of modulesDep.trim().split("\n")) {
      const [module, deps = ""] = line.split(":");
      for (const file of [
        module!,
        ...deps
          .trim()
          .split(" ")
          .filter((dep) => dep !== ""),
      ]) {
        expect(existsSync(join(unpacked, "lib/modules", version, file)), file).toBe(true);
      }
    }
    for (const module of listed) {
      const file = module.replaceAll("_", "[-_]");
      expect(modulesDep, module).toMatch(new RegExp(`/${file}\\.ko:`));
    }
  });

  it("has an /init that busybox sh parses", async () => {
    const result = await runInRamdisk(unpacked, ["/bin/sh", "-n", "/init"]);
    expect(result.code, result.stderr).toBe(0);
  });

  it(
    "is reproducible: two uncached builds of the same inputs are byte-identical",
    async () => {
      // The small stand-in agent keeps the two compressions quick.
      const outputs = [join(dir, "a"), join(dir, "b")];
      for (const out of outputs) {
        const build = await buildRamdisk({ agent: STAND_IN, out, noCache: true });
        expect(build.code, build.stderr).toBe(0);
      }
      const [first, second] = await Promise.all(outputs.map((out) => readFile(join(out, "anvil.initramfs"))));
      expect(first!.length).toBeGreaterThan(1_000_000);
      expect(first!.equals(second!)).toBe(true);
    },
    BUILD_TIMEOUT_MS,
  );
});
