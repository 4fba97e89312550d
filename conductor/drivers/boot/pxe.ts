import type { BootInterface, DriverNode } from "../interfaces.ts";
import { allMacs, pxeMacs } from "./boot-ports.ts";
import { bootModeOf } from "./boot-mode.ts";
import type { BootMode } from "./boot-mode.ts";
import { pathInside, removeFile, writeFileAtomic } from "./boot-files.ts";
import { cpuArchOf, deployImagesFor } from "./deploy-images.ts";
import type { DeployImageDefaults, DeployImages } from "./deploy-images.ts";
import { DEFAULT_KERNEL_WORDS, ramdiskKernelWords } from "./kernel-append.ts";
import { checkKernelWords, formatKernelArgs } from "./kernel-args.ts";
import { macPxeName } from "./mac.ts";
import type { Mac } from "./mac.ts";
import { checkedUuid } from "./node-uuid.ts";

export interface PxeBootOptions {
  /** The TFTP root: pxelinux.cfg/ and grub.cfg-* live here. */
  root: string;
  /** Used when driver_info has no deploy_kernel / deploy_ramdisk (TFTP paths or URLs). */
  defaultDeployImages?: DeployImageDefaults;
  /** Words on every deploy kernel command line. Default: consoles on tty0 and ttyS0. */
  kernelArgs?: readonly string[];
  /** Instead of kernelArgs for nodes of these cpu_arch (canonical names), e.g. aarch64's ttyAMA0 console. */
  kernelArgsByArch?: Readonly<Record<string, readonly string[]>>;
}

/** pxelinux (BIOS) config: boot the deploy ramdisk, or the local disk. */
export function pxelinuxConfig(
  request: { uuid: string } & ({ images: DeployImages; kernelWords: readonly string[] } | { local: true }),
): string {
  if ("local" in request) {
    return [
      `# Anvil: node ${request.uuid} boots from its local disk`,
      "default local",
      "label local",
      "  localboot 0",
      "",
    ].join("\n");
  }
  return [
    `# Anvil: deploy ramdisk for node ${request.uuid}`,
    "default deploy",
    "label deploy",
    `  kernel ${request.images.kernel}`,
    `  append initrd=${request.images.ramdisk} ${request.kernelWords.join(" ")}`,
    "",
  ].join("\n");
}

/** GRUB (UEFI) config: boot the deploy ramdisk, or leave GRUB so the firmware boots the disk. */
export function grubConfig(
  request: { uuid: string } & ({ images: DeployImages; kernelWords: readonly string[] } | { local: true }),
): string {
  if ("local" in request) {
    return [
      `# Anvil: node ${request.uuid} boots from its local disk`,
      "set default=local",
      "set timeout=0",
      'menuentry "local" {',
      "  exit",
      "}",
      "",
    ].join("\n");
  }
  return [
    `# Anvil: deploy ramdisk for node ${request.uuid}`,
    "set default=deploy",
    "set timeout=5",
    'menuentry "deploy" {',
    `  linux ${request.images.kernel} ${request.kernelWords.join(" ")}`,
    `  initrd ${request.images.ramdisk}`,
    "}",
    "",
  ].join("\n");
}

/** The config file a PXE loader looks up for a MAC: pxelinux.cfg/01-<mac> (BIOS) or grub.cfg-01-<mac> (UEFI). */
export function pxeConfigName(mac: Mac, mode: BootMode): string {
  return mode === "uefi" ? `grub.cfg-${macPxeName(mac)}` : `pxelinux.cfg/${macPxeName(mac)}`;
}

/** Classic PXE over TFTP: per-MAC pxelinux or GRUB configs in the TFTP root. */
export class PxeBoot implements BootInterface {
  private readonly root: string;
  private readonly defaults: DeployImageDefaults;
  private readonly kernelWords: string[];
  private readonly kernelWordsByArch: ReadonlyMap<string, string[]>;

  constructor(options: PxeBootOptions) {
    this.root = options.root;
    this.defaults = options.defaultDeployImages ?? {};
    this.kernelWords = checkKernelWords(options.kernelArgs ?? DEFAULT_KERNEL_WORDS);
    this.kernelWordsByArch = new Map(
      Object.entries(options.kernelArgsByArch ?? {}).map(([arch, words]) => [arch, checkKernelWords(words)]),
    );
  }

  configPath(mac: Mac, mode: BootMode): string {
    return pathInside(this.root, pxeConfigName(mac, mode));
  }

  /** @throws InvalidDriverInfo */
  validate(node: DriverNode): void {
    checkedUuid(node.uuid);
    this.kernelWordsFor(node);
    pxeMacs(node);
    deployImagesFor(node, this.defaults);
  }

  /** @throws InvalidDriverInfo */
  async prepareRamdisk(node: DriverNode, options: { agentParams: Record<string, string> }): Promise<void> {
    this.validate(node);
    const uuid = checkedUuid(node.uuid);
    const images = deployImagesFor(node, this.defaults);
    const mode = bootModeOf(node);
    const agentWords = formatKernelArgs(options.agentParams);
    for (const mac of pxeMacs(node)) {
      const bootif = "BOOTIF" in options.agentParams ? [] : [`BOOTIF=${macPxeName(mac)}`];
      const kernelWords = [...this.kernelWordsFor(node), ...agentWords, ...bootif];
      const config =
        mode === "uefi"
          ? grubConfig({ uuid, images, kernelWords })
          : pxelinuxConfig({ uuid, images, kernelWords });
      await writeFileAtomic(this.configPath(mac, mode), config);
    }
  }

  /**
   * The configured words for the node's cpu_arch, else the common ones; the node's
   * driver_info.kernel_append_params instead when it has one. @throws InvalidDriverInfo
   */
  private kernelWordsFor(node: DriverNode): string[] {
    const arch = cpuArchOf(node);
    const defaults = (arch === undefined ? undefined : this.kernelWordsByArch.get(arch)) ?? this.kernelWords;
    return ramdiskKernelWords(node, defaults);
  }

  async cleanUpRamdisk(node: DriverNode): Promise<void> {
    await this.removeConfigs(node);
  }

  /** @throws InvalidDriverInfo */
  async prepareInstance(node: DriverNode): Promise<void> {
    const uuid = checkedUuid(node.uuid);
    const mode = bootModeOf(node);
    const config =
      mode === "uefi" ? grubConfig({ uuid, local: true }) : pxelinuxConfig({ uuid, local: true });
    for (const mac of pxeMacs(node)) await writeFileAtomic(this.configPath(mac, mode), config);
  }

  async cleanUpInstance(node: DriverNode): Promise<void> {
    await this.removeConfigs(node);
  }

  // Both layouts go: the boot mode may have changed since the files were written.
  private async removeConfigs(node: DriverNode): Promise<void> {
    for (const mac of allMacs(node)) {
      await removeFile(this.configPath(mac, "bios"));
      await removeFile(this.configPath(mac, "uefi"));
    }
  }
}
