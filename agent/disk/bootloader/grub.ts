import { access, mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import type { Logger } from "../../../shared/log.ts";
import { exec } from "../../../shared/system/exec.ts";
import { ensureDeviceNode } from "../device-node.ts";
import { GPT_TYPES } from "../raid/commands.ts";
import { CORE_MODULES, grubInstallArgs, minimalGrubConfig, withBiosBootPartition } from "./grub-commands.ts";
import type { BootMode } from "./grub-commands.ts";

export class BootloaderError extends Error {
  override name = "BootloaderError";
}

export interface InstallRequest {
  /** The disk or md array the image was written to. */
  target: string;
  /** The disks that must each be able to boot: the array's holders, or the target itself. */
  holders: readonly string[];
  bootMode: BootMode;
  /** UUID or PARTUUID of the root filesystem; default: the first Linux filesystem on the target. */
  rootUuid?: string;
  /**
   * Run the image's own grub-install and grub-mkconfig in a chroot (IPA's way) when it has them. Off by
   * default: that is code from the tenant's image running as root inside the ramdisk, beside the agent's
   * token and its link to the conductor. Off, the ramdisk's GRUB installs and the image's grub.cfg is kept.
   */
  imageBootloader?: boolean;
  signal: AbortSignal;
  logger: Logger;
}

export interface InstallResult {
  boot_mode: BootMode;
  root_partition: string;
  /** Disks with GRUB in their boot sector (BIOS) or ESPs with GRUB (UEFI). */
  installed_to: string[];
  /** Whose GRUB ran: the image's own (in a chroot) or the ramdisk's. */
  grub: "image" | "ramdisk";
  grub_cfg: "image" | "generated" | "grub-mkconfig";
}

const LINUX_FILESYSTEMS = new Set(["ext2", "ext3", "ext4", "xfs", "btrfs"]);

/**
 * Installs GRUB for the image on `target`: mounts its root filesystem and installs the ramdisk's GRUB,
 * keeping the image's grub.cfg or writing a minimal one if it has none. Only with `imageBootloader` does it
 * run the image's own grub-install and grub-mkconfig in a chroot (with /dev, /proc and /sys bound). BIOS: GRUB goes to every holder's boot
 * sector (on GPT into its BIOS boot partition). UEFI: into every holder's ESP, all with the same files.
 * @throws BootloaderError naming the step and device that failed; the signal's reason when aborted.
 */
export async function installGrub(request: InstallRequest): Promise<InstallResult> {
  const { signal, logger } = request;
  const root = await findRootPartition(request.target, request.rootUuid, signal);
  const mnt = await mkdtemp(join(tmpdir(), "anvil-root-"));
  const mounted: string[] = [];
  const mount = async (args: string[], where: string): Promise<void> => {
    await run("mount", [...args, where], signal);
    mounted.push(where);
  };
  try {
    await mount([root.path], mnt);
    const imageGrub =
      request.imageBootloader === true
        ? await firstExisting(mnt, ["usr/sbin/grub-install", "usr/sbin/grub2-install"])
        : null;
    const installedTo: string[] = [];
    const bootDirectory = imageGrub === null ? join(mnt, "boot") : "/boot";
    const inChroot = async (command: string, args: string[]): Promise<void> => {
      if (imageGrub === null) await run(command, args, signal);
      else await run("chroot", [mnt, command, ...args], signal);
    };
    if (imageGrub !== null) {
      for (const dir of ["dev", "proc", "sys"]) {
        // a minimal image may lack the mount points; the directories are harmless in any image
        await mkdir(join(mnt, dir), { recursive: true });
        await mount(["-o", "bind", `/${dir}`], join(mnt, dir));
      }
    }
    const grubInstall = imageGrub === null ? "grub-install" : `/${imageGrub}`;
    const modules = imageGrub === null ? CORE_MODULES : undefined;

    if (request.bootMode === "bios") {
      for (const disk of request.holders) {
        await ensureBiosBootPartition(disk, signal);
        await inChroot(grubInstall, grubInstallArgs({ bootMode: "bios", disk, bootDirectory, modules }));
        installedTo.push(disk);
        logger.info({ disk }, "GRUB installed to the boot sector");
      }
    } else {
      const esps = await Promise.all(request.holders.map((disk) => findEsp(disk, signal)));
      const efi = join(mnt, "boot", "efi");
      await run("mkdir", ["-p", efi], signal);
      for (const [index, esp] of esps.entries()) {
        await ensureVfat(esp, signal);
        await mount([esp], efi);
        // Every ESP gets the same GRUB (its config is on the root filesystem), so any disk boots alone.
        await inChroot(
          grubInstall,
          grubInstallArgs({
            bootMode: "uefi",
            disk: request.holders[index]!,
            bootDirectory,
            efiDirectory: imageGrub === null ? efi : "/boot/efi",
            modules,
          }),
        );
        await run("umount", [efi], signal);
        mounted.pop();
        installedTo.push(esp);
        logger.info({ esp }, "GRUB installed to the EFI system partition");
      }
    }

    let grubCfg: InstallResult["grub_cfg"] = "image";
    const cfg = await firstExisting(mnt, ["boot/grub/grub.cfg", "boot/grub2/grub.cfg"]);
    if (imageGrub !== null) {
      const mkconfig = await firstExisting(mnt, ["usr/sbin/grub-mkconfig", "usr/sbin/grub2-mkconfig"]);
      if (mkconfig !== null) {
        await inChroot(`/${mkconfig}`, ["-o", `/${cfg ?? "boot/grub/grub.cfg"}`]);
        grubCfg = "grub-mkconfig";
      }
    }
    if (grubCfg === "image" && cfg === null) {
      await run("mkdir", ["-p", join(mnt, "boot/grub")], signal);
      await writeFile(join(mnt, "boot/grub/grub.cfg"), await generatedConfig(mnt, root.uuid));
      grubCfg = "generated";
    }
    return {
      boot_mode: request.bootMode,
      root_partition: root.path,
      installed_to: installedTo,
      grub: imageGrub === null ? "ramdisk" : "image",
      grub_cfg: grubCfg,
    };
  } finally {
    for (const where of mounted.reverse()) {
      const result = await exec("umount", [where], { timeoutMs: 60_000 });
      if (result.code !== 0) await exec("umount", ["-l", where], { timeoutMs: 60_000 });
    }
    await rm(mnt, { recursive: true, force: true }).catch(() => undefined);
    await exec("sync", [], { timeoutMs: 120_000 });
  }
}

interface Filesystem {
  path: string;
  type: string;
  uuid: string;
  partuuid: string;
}

/** The partition (or the unpartitioned target) holding the root filesystem. */
async function findRootPartition(
  target: string,
  rootUuid: string | undefined,
  signal: AbortSignal,
): Promise<Filesystem> {
  await exec("blockdev", ["--rereadpt", target], { signal, timeoutMs: 60_000 });
  const candidates = [...(await partitionsOf(target, signal)), target];
  const found: Filesystem[] = [];
  for (const path of candidates) {
    const fs = await probe(path, signal);
    if (fs !== null) found.push(fs);
  }
  const wanted = rootUuid?.toLowerCase();
  const root =
    wanted === undefined
      ? found.find((fs) => LINUX_FILESYSTEMS.has(fs.type))
      : found.find((fs) => fs.uuid === wanted || fs.partuuid === wanted);
  if (root === undefined) {
    const seen = found.map((fs) => `${fs.path} (${fs.type} ${fs.uuid})`).join(", ") || "no filesystems";
    throw new BootloaderError(
      `no root filesystem ${wanted === undefined ? "" : `with UUID ${wanted} `}on ${target}; found ${seen}`,
    );
  }
  return root;
}

async function probe(path: string, signal: AbortSignal): Promise<Filesystem | null> {
  const result = await exec("blkid", ["-o", "export", path], { signal, timeoutMs: 60_000 });
  if (result.code !== 0) return null;
  const fields = new Map(
    result.stdout
      .split("\n")
      .map((line) => line.split("=", 2) as [string, string | undefined])
      .filter((pair): pair is [string, string] => pair[1] !== undefined),
  );
  return {
    path,
    type: fields.get("TYPE") ?? "",
    uuid: (fields.get("UUID") ?? "").toLowerCase(),
    partuuid: (fields.get("PARTUUID") ?? "").toLowerCase(),
  };
}

/** Partition devices of a disk from sysfs, with their device nodes made. */
async function partitionsOf(disk: string, signal: AbortSignal): Promise<string[]> {
  const name = basename(disk);
  const entries = await readdir(`/sys/class/block/${name}`).catch(() => [] as string[]);
  const partitions: string[] = [];
  for (const entry of entries.filter((e) => e.startsWith(name)).sort()) {
    if (await exists(`/sys/class/block/${name}/${entry}/partition`)) {
      partitions.push(await ensureDeviceNode(entry, signal));
    }
  }
  return partitions;
}

interface SfdiskDump {
  partitiontable: { label: string; partitions?: { node: string; type: string; start: number }[] };
}

async function readTable(disk: string, signal: AbortSignal): Promise<SfdiskDump["partitiontable"] | null> {
  const result = await exec("sfdisk", ["--json", disk], { signal, timeoutMs: 60_000 });
  if (result.code !== 0) return null;
  return (JSON.parse(result.stdout) as SfdiskDump).partitiontable;
}

/**
 * GRUB on a GPT disk embeds its core image in a BIOS boot partition. Holders of Anvil's software RAID have
 * one; a partition image's disk gets one in the 1 MiB gap before its first partition.
 */
async function ensureBiosBootPartition(disk: string, signal: AbortSignal): Promise<void> {
  const table = await readTable(disk, signal);
  if (table === null || table.label !== "gpt") return; // MBR: GRUB embeds after the MBR
  if ((table.partitions ?? []).some((p) => p.type.toUpperCase() === GPT_TYPES.bios_boot)) return;
  const dump = await run("sfdisk", ["--dump", disk], signal);
  let script: string;
  try {
    script = withBiosBootPartition(dump);
  } catch (error) {
    throw new BootloaderError(`${disk}: ${(error as Error).message}`);
  }
  await run("sfdisk", ["-q", "--no-reread", "--no-tell-kernel", disk], { signal, input: script });
}

async function findEsp(disk: string, signal: AbortSignal): Promise<string> {
  const table = await readTable(disk, signal);
  const esp = table?.partitions?.find((p) => p.type.toUpperCase() === GPT_TYPES.esp);
  if (esp === undefined) throw new BootloaderError(`${disk} has no EFI system partition`);
  return ensureDeviceNode(basename(esp.node), signal);
}

async function ensureVfat(esp: string, signal: AbortSignal): Promise<void> {
  const fs = await probe(esp, signal);
  if (fs?.type === "vfat") return;
  await run("mkfs.vfat", ["-F", "32", "-n", "ESP", esp], signal);
}

async function generatedConfig(mnt: string, fsUuid: string): Promise<string> {
  const boot = await readdir(join(mnt, "boot")).catch(() => [] as string[]);
  const kernel = boot
    .filter((f) => f.startsWith("vmlinuz"))
    .sort()
    .pop();
  if (kernel === undefined) throw new BootloaderError("the image has no /boot/vmlinuz* and no grub.cfg");
  const initrd = boot
    .filter((f) => f.startsWith("initrd") || f.startsWith("initramfs"))
    .sort()
    .pop();
  return minimalGrubConfig({
    fsUuid,
    kernel: `/boot/${kernel}`,
    initrd: initrd === undefined ? null : `/boot/${initrd}`,
  });
}

async function firstExisting(root: string, paths: string[]): Promise<string | null> {
  for (const path of paths) {
    if (await exists(join(root, path))) return path;
  }
  return null;
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

async function run(
  command: string,
  args: string[],
  options: AbortSignal | { signal: AbortSignal; input: string },
): Promise<string> {
  const { signal, input } = options instanceof AbortSignal ? { signal: options, input: undefined } : options;
  const result = await exec(command, args, {
    signal,
    timeoutMs: 600_000,
    ...(input === undefined ? {} : { input }),
  });
  if (result.code !== 0) {
    throw new BootloaderError(
      `${command} ${args.join(" ")} failed (${result.code}): ${result.stderr.trim()}`,
    );
  }
  return result.stdout;
}
