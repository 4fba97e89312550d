import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { copyFile, mkdir, mkdtemp, rename, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import type { JsonObject } from "../../shared/resources.ts";
import { exec } from "../../shared/system/exec.ts";

/** The ISO 9660 volume ID the deploy ramdisk looks for (the virtual-media contract with the ramdisk). */
export const VMEDIA_VOLUME_ID = "ANVIL_VMEDIA";
/** Where network_data.json sits on the ISO, as on a config drive. */
export const NETWORK_DATA_PATH = "openstack/latest/network_data.json";

/** Where a conductor keeps (and serves) its virtual-media ISOs. */
export function vmediaDirOf(dataDir: string): string {
  return join(dataDir, "vmedia");
}

export class IsoBuildError extends Error {
  override name = "IsoBuildError";
}

/** What goes on one virtual-media ISO. */
export interface VmediaIsoContent {
  /** Local paths of the deploy kernel and initramfs. */
  kernel: string;
  ramdisk: string;
  /** Kernel command line words, already checked (no quotes, `$`, `;` or whitespace). */
  kernelWords: readonly string[];
  /** The node's network_data (OpenStack's network_data.json); null: none is written. */
  networkData: JsonObject | null;
}

/** A built (or found) ISO: its file name in the builder's directory. */
export interface BuiltIso {
  name: string;
  path: string;
  bytes: number;
  /** False when an identical ISO already existed (content digest). */
  built: boolean;
  /** Time spent building, 0 when cached. */
  ms: number;
}

export interface IsoBuilderOptions {
  /** Where ISOs are written and served from. */
  dir: string;
  /** Bound on one grub-mkrescue run. Default 120 s. */
  timeoutMs?: number;
  now?: () => number;
}

const FILE_DIGESTS = new Map<string, { size: number; mtimeMs: number; digest: string }>();

/** SHA-256 of a file, remembered by path, size and mtime (a 50 MB initramfs is hashed once). */
async function fileDigest(path: string): Promise<string> {
  const info = await stat(path);
  const known = FILE_DIGESTS.get(path);
  if (known && known.size === info.size && known.mtimeMs === info.mtimeMs) return known.digest;
  const hash = createHash("sha256");
  await pipeline(createReadStream(path), hash);
  const digest = hash.digest("hex");
  FILE_DIGESTS.set(path, { size: info.size, mtimeMs: info.mtimeMs, digest });
  return digest;
}

/**
 * The GRUB menu of the ISO: one entry, booted after a second, the same under BIOS and UEFI. The words come
 * checked (no quote, `$`, `;`): nothing in them can end the line or start a GRUB expansion.
 */
export function grubConfig(kernelWords: readonly string[]): string {
  return [
    "set timeout=1",
    "set default=0",
    "serial --unit=0 --speed=115200",
    "terminal_input console serial",
    "terminal_output console serial",
    'menuentry "Anvil deploy ramdisk" {',
    `  linux /anvil/kernel ${kernelWords.join(" ")}`,
    "  initrd /anvil/initramfs",
    "}",
    "",
  ].join("\n");
}

/**
 * Builds the per-node virtual-media ISO (Ironic's prepare_deploy_iso): the deploy kernel and initramfs,
 * network_data.json and a GRUB menu, bootable under BIOS (El Torito, GRUB's i386-pc image) and UEFI (an EFI
 * system partition with GRUB's x86_64-efi image), volume ID ANVIL_VMEDIA, made by grub-mkrescue (xorriso)
 * spawned with an argv array. ISOs are named by the digest of their content: the same kernel, initramfs,
 * command line and network data give the same ISO, built once; nodes hold it until they release it.
 */
export class VmediaIsoBuilder {
  private readonly running = new Map<string, Promise<BuiltIso>>();
  private readonly holders = new Map<string, Set<string>>();

  constructor(private readonly options: IsoBuilderOptions) {}

  get dir(): string {
    return this.options.dir;
  }

  /** The content digest an ISO is named by. */
  async digestOf(content: VmediaIsoContent): Promise<string> {
    const hash = createHash("sha256");
    hash.update(`kernel ${await fileDigest(content.kernel)}\n`);
    hash.update(`ramdisk ${await fileDigest(content.ramdisk)}\n`);
    hash.update(`cmdline ${content.kernelWords.join(" ")}\n`);
    hash.update(`network_data ${JSON.stringify(content.networkData)}\n`);
    return hash.digest("hex");
  }

  /**
   * The ISO for this content, built unless an identical one exists; `holder` (a node) keeps it until release.
   * @throws IsoBuildError when grub-mkrescue fails or runs past the bound
   */
  async acquire(holder: string, content: VmediaIsoContent, signal?: AbortSignal): Promise<BuiltIso> {
    const digest = await this.digestOf(content);
    const name = `vmedia-${digest.slice(0, 32)}.iso`;
    let holders = this.holders.get(name);
    if (!holders) this.holders.set(name, (holders = new Set()));
    holders.add(holder);
    const path = join(this.options.dir, name);
    const existing = await stat(path).catch(() => null);
    if (existing?.isFile()) return { name, path, bytes: existing.size, built: false, ms: 0 };
    let build = this.running.get(name);
    if (!build) {
      build = this.build(name, content, signal).finally(() => this.running.delete(name));
      this.running.set(name, build);
    }
    return build;
  }

  /** Drops `holder`'s hold on an ISO; the last one out deletes the file. Never throws. */
  async release(holder: string, name: string): Promise<void> {
    const holders = this.holders.get(name);
    holders?.delete(holder);
    if (holders && holders.size > 0) return;
    this.holders.delete(name);
    if (!/^vmedia-[0-9a-f]{32}\.iso$/.test(name)) return;
    await rm(join(this.options.dir, name), { force: true }).catch(() => undefined);
  }

  private async build(name: string, content: VmediaIsoContent, signal?: AbortSignal): Promise<BuiltIso> {
    const now = this.options.now ?? Date.now;
    const started = now();
    await mkdir(this.options.dir, { recursive: true });
    const work = await mkdtemp(join(this.options.dir, ".build-"));
    try {
      const root = join(work, "root");
      await mkdir(join(root, "anvil"), { recursive: true });
      await mkdir(join(root, "boot", "grub"), { recursive: true });
      await mkdir(join(root, "openstack", "latest"), { recursive: true });
      // NOTE: copies, not links: xorriso follows no symlink into the image unless told, and the sources may
      // change under a running build (a new ramdisk)
      await copyFile(content.kernel, join(root, "anvil", "kernel"));
      await copyFile(content.ramdisk, join(root, "anvil", "initramfs"));
      await writeFile(join(root, "boot", "grub", "grub.cfg"), grubConfig(content.kernelWords));
      if (content.networkData !== null)
        await writeFile(join(root, NETWORK_DATA_PATH), JSON.stringify(content.networkData));
      const out = join(work, "out.iso");
      const result = await exec("grub-mkrescue", ["-o", out, root, "--", "-volid", VMEDIA_VOLUME_ID], {
        timeoutMs: this.options.timeoutMs ?? 120_000,
        signal,
      }).catch((error: unknown) => {
        throw new IsoBuildError(`grub-mkrescue did not finish: ${(error as Error).message}`);
      });
      if (result.code !== 0) {
        throw new IsoBuildError(
          `grub-mkrescue failed (${result.code}): ${result.stderr.trim().split("\n").slice(-3).join("; ")}`,
        );
      }
      const path = join(this.options.dir, name);
      await rename(out, path);
      const bytes = (await stat(path)).size;
      return { name, path, bytes, built: true, ms: now() - started };
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }
}
