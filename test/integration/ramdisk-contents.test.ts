import { existsSync } from "node:fs";
import { mkdtemp, readdir, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exec } from "../../shared/system/exec.ts";
import type { ExecResult } from "../../shared/system/exec.ts";
import { ensureAgentBuilt } from "../helpers/agent.ts";
import { readDocumentedModules } from "../helpers/ramdisk-drivers.ts";

const ROOT = resolve(import.meta.dirname, "../..");
const STAND_IN = join(ROOT, "images/ramdisk/stand-in-agent.sh");
const BUILD_TIMEOUT_MS = 900_000;
/** A module's name from its file path, as modprobe spells it (usb-storage.ko is usb_storage). */
const moduleName = (path: string): string =>
  path.replace(/^.*\//, "").replace(/\.ko$/, "").replaceAll("-", "_");

/** modules.dep: module name -> the names of the modules it needs. */
function parseModulesDep(text: string): Map<string, string[]> {
  const deps = new Map<string, string[]>();
  for (const line of text.trim().split("\n")) {
    const [module = "", rest = ""] = line.split(":");
    deps.set(
      moduleName(module),
      rest
        .trim()
        .split(" ")
        .filter((dep) => dep !== "")
        .map(moduleName),
    );
  }
  return deps;
}

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

  it("carries badblocks (burnin_disk without fio) and ethtool (NIC firmware), which run with their libraries", async () => {
    // badblocks without a device prints its usage: it loaded libext2fs and libcom_err
    const badblocks = await runInRamdisk(unpacked, ["/usr/sbin/badblocks"]);
    expect(badblocks.stderr).toMatch(/^Usage: \S*badblocks \[-b block_size\]/m);
    const ethtool = await runInRamdisk(unpacked, ["/usr/sbin/ethtool", "--version"]);
    expect(ethtool.code, ethtool.stderr).toBe(0);
    expect(ethtool.stdout).toMatch(/^ethtool version \d/);
    expect(await readFile(join(unpacked, "etc/anvil/build-info"), "utf8")).toMatch(
      /^e2fsprogs \S+\nethtool \S+$/m,
    );
  });

  it("carries fio built without the optional engines' libraries, with the net, libaio and psync engines", async () => {
    const engines = await runInRamdisk(unpacked, ["/usr/bin/fio", "--enghelp"]);
    expect(engines.code, engines.stderr).toBe(0);
    const listed = engines.stdout.split("\n").map((line) => line.trim());
    expect(listed).toEqual(expect.arrayContaining(["net", "libaio", "psync"]));
    expect(listed).not.toContain("rbd");
    // only the libraries those engines need came along: none of Debian's fio's ceph, gluster or rdma ones
    const libs = await runInRamdisk(unpacked, ["/bin/sh", "-c", "ls /usr/lib/x86_64-linux-gnu"]);
    expect(libs.stdout).toMatch(/^libaio\.so\.1$/m);
    expect(libs.stdout).not.toMatch(/librados|librbd|libgfapi|libibverbs|libicudata/);
    expect(await readFile(join(unpacked, "etc/anvil/build-info"), "utf8")).toMatch(
      /^fio \S+ \(source, optional engines off\)$/m,
    );
  });

  it("carries exactly drivers.md's modules with their dependencies, and loads them in its order", async () => {
    const listed = await readDocumentedModules();
    // the doc's families, spot-checked, so a table the parser misreads cannot pass as empty or partial
    for (const module of ["virtio_net", "igb", "i40e", "ice", "mlx5_core", "bnxt_en", "qede", "megaraid_sas"])
      expect(listed, module).toContain(module);
    expect(new Set(listed).size).toBe(listed.length);
    expect(listed.indexOf("crc32c_generic")).toBeLessThan(listed.indexOf("raid456"));
    expect((await readFile(join(unpacked, "etc/anvil/modules"), "utf8")).trim().split("\n")).toEqual(listed);

    // What the archive holds, read from the cpio's own listing.
    const listing = await exec("bash", [
      "-c",
      'set -e -o pipefail; zstd -dc "$1" | cpio -t --quiet',
      "list",
      join(dir, "anvil.initramfs"),
    ]);
    expect(listing.code, listing.stderr).toBe(0);
    const carried = new Set(
      listing.stdout
        .split("\n")
        .filter((path) => path.endsWith(".ko"))
        .map(moduleName),
    );

    // Debian's full modules.dep: every listed module and everything it needs (transitively) is carried.
    const kernel = (await exec("bash", ["images/kernel/fetch.sh"], { cwd: ROOT })).stdout.trim();
    const version = (await readFile(join(kernel, "version"), "utf8")).trim();
    const modulesDir = join(kernel, "lib/modules", version);
    const deps = parseModulesDep(await readFile(join(modulesDir, "modules.dep"), "utf8"));
    const needed = new Set<string>();
    const visit = (module: string): void => {
      if (needed.has(module)) return;
      const entry = deps.get(module);
      expect(entry, `${module} is not a module of Linux ${version}`).toBeDefined();
      needed.add(module);
      for (const dep of entry ?? []) visit(dep);
    };
    for (const module of listed) visit(module);
    expect([...needed].filter((module) => !carried.has(module))).toEqual([]);
    // Nothing else but what those modules' softdeps name (modprobe --show-depends follows them), directly
    // or through an alias (ext4's "pre: crypto-crc32c" is crc32c_intel), with their own dependencies.
    const softdepTargets = new Set<string>();
    for (const line of (await readFile(join(modulesDir, "modules.softdep"), "utf8")).split("\n")) {
      const [, module, rest] = /^softdep (\S+) (.*)$/.exec(line) ?? [];
      if (module !== undefined && needed.has(moduleName(module)))
        for (const word of rest!.split(" ")) if (!word.endsWith(":") && word !== "") softdepTargets.add(word);
    }
    const softdeps = new Set<string>();
    for (const line of (await readFile(join(modulesDir, "modules.alias"), "utf8")).split("\n")) {
      const [, alias, module] = /^alias (\S+) (\S+)$/.exec(line) ?? [];
      if (alias !== undefined && softdepTargets.has(alias)) softdeps.add(moduleName(module!));
    }
    for (const target of softdepTargets) if (deps.has(moduleName(target))) softdeps.add(moduleName(target));
    const extra = [...carried].filter((module) => !needed.has(module));
    expect(
      extra.filter((module) => !softdeps.has(module) && !extra.some((e) => deps.get(e)?.includes(module))),
    ).toEqual([]);

    // The device drivers /init loads only for the devices present: the listed modules with a PCI or virtio
    // alias in Debian's modules.alias, in the list's order; the rest (filesystems, md, VLAN) load always.
    const byDevice = new Set<string>();
    for (const line of (await readFile(join(modulesDir, "modules.alias"), "utf8")).split("\n")) {
      const module = /^alias (?:pci|virtio):\S* (\S+)$/.exec(line)?.[1];
      if (module !== undefined) byDevice.add(moduleName(module));
    }
    const written = (await readFile(join(unpacked, "etc/anvil/modules-by-device"), "utf8"))
      .trim()
      .split("\n");
    expect(written).toEqual(listed.filter((module) => byDevice.has(module)));
    for (const module of ["virtio_net", "ice", "megaraid_sas", "nvme"])
      expect(written, module).toContain(module);
    for (const module of ["sd_mod", "raid456", "ext4", "8021q", "usb_storage"])
      expect(written).not.toContain(module);

    // The ramdisk's own modules.dep (busybox modprobe reads it) resolves inside the ramdisk.
    const ramdiskDep = await readFile(join(unpacked, "lib/modules", version, "modules.dep"), "utf8");
    for (const line of ramdiskDep.trim().split("\n")) {
      for (const file of line
        .replace(":", "")
        .split(" ")
        .filter((f) => f !== "")) {
        expect(existsSync(join(unpacked, "lib/modules", version, file)), file).toBe(true);
      }
    }
  });

  it("carries every firmware file its modules name, and only those", async () => {
    const versions = await readdir(join(unpacked, "lib/modules"));
    const named: string[] = [];
    const kos = await exec("find", [join(unpacked, "lib/modules", versions[0]!), "-name", "*.ko"]);
    for (const ko of kos.stdout.trim().split("\n")) {
      const info = await exec("modinfo", ["-F", "firmware", ko]);
      expect(info.code, info.stderr).toBe(0);
      named.push(...info.stdout.split("\n").filter((name) => name !== ""));
    }
    // qede's qed cannot bring its NIC up without its file
    expect(named).toContainEqual(expect.stringMatching(/^qed\/qed_init_values/));
    const present = await exec("find", [join(unpacked, "usr/lib/firmware"), "-type", "f", "-printf", "%P\n"]);
    expect(present.stdout.trim().split("\n").sort()).toEqual([...new Set(named)].sort());
    const buildInfo = await readFile(join(unpacked, "etc/anvil/build-info"), "utf8");
    expect(buildInfo).toMatch(/^firmware-qlogic \S+$/m);
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
