import type { BootInterface, DriverNode } from "../interfaces.ts";
import { allMacs, pxeMacs } from "./boot-ports.ts";
import { bootModeOf } from "./boot-mode.ts";
import type { BootMode } from "./boot-mode.ts";
import { pathInside, removeFile, writeFileAtomic } from "./boot-files.ts";
import { cpuArchOf, deployImagesFor, requireHttpUrl } from "./deploy-images.ts";
import type { DeployImageDefaults, DeployImages } from "./deploy-images.ts";
import { DEFAULT_KERNEL_WORDS, ramdiskKernelWords } from "./kernel-append.ts";
import { checkKernelWords, formatKernelArgs } from "./kernel-args.ts";
import { macHyphenated, macPxeName } from "./mac.ts";
import type { Mac } from "./mac.ts";
import { checkedUuid } from "./node-uuid.ts";

export interface IpxeBootOptions {
  /** The directory served over HTTP (see the boot files plugin); boot.ipxe and nodes/ live here. */
  root: string;
  /** Used when driver_info has no deploy_kernel / deploy_ramdisk. */
  defaultDeployImages?: DeployImageDefaults;
  /** Words on every deploy kernel command line. Default: consoles on tty0 and ttyS0. */
  kernelArgs?: readonly string[];
  /** Instead of kernelArgs for nodes of these cpu_arch (canonical names), e.g. aarch64's ttyAMA0 console. */
  kernelArgsByArch?: Readonly<Record<string, readonly string[]>>;
  /** How long iPXE waits before retrying a failed download. Default 10 s. */
  retryDelaySec?: number;
}

/** The script a machine no node has boots when auto-discovery is on (absent when it is off). */
export const DISCOVERY_SCRIPT = "discovery.ipxe";

/**
 * The one script every machine first fetches: chain to the script named after the booting NIC's MAC; a machine
 * without one tries the discovery script, which exists only while auto-discovery is on.
 */
export function ipxeEntryScript(): string {
  return [
    "#!ipxe",
    "# Anvil: chain to this machine's own script, named after the MAC iPXE booted from.",
    "chain nodes/${net0/mac:hexhyp}.ipxe || goto discovery",
    ":discovery",
    `chain ${DISCOVERY_SCRIPT} || goto unknown`,
    ":unknown",
    "echo Anvil: no boot script for ${net0/mac}; trying the next boot device",
    "exit",
    "",
  ].join("\n");
}

/**
 * The discovery script: the deploy ramdisk for whatever machine fetches it, its BOOTIF from iPXE's own MAC.
 * BIOS only names the initrd by URL; UEFI's EFI stub finds it by name, which the deploy script also gives.
 */
export function ipxeDiscoveryScript(request: {
  images: DeployImages;
  kernelWords: readonly string[];
  retryDelaySec: number;
}): string {
  return ipxeDeployScript({
    uuid: "(auto-discovery)",
    images: request.images,
    kernelWords: [...request.kernelWords, "BOOTIF=01-${net0/mac:hexhyp}"],
    bootMode: "uefi",
    retryDelaySec: request.retryDelaySec,
  }).replace(
    "# Anvil: deploy ramdisk for node (auto-discovery)",
    "# Anvil: deploy ramdisk for a machine no node has (auto-discovery)",
  );
}

/** The per-MAC script that boots the deploy ramdisk, retrying downloads until they work. */
export function ipxeDeployScript(request: {
  uuid: string;
  images: DeployImages;
  kernelWords: readonly string[];
  bootMode: BootMode;
  retryDelaySec: number;
}): string {
  const { uuid, images, bootMode, retryDelaySec } = request;
  // Under UEFI the kernel's EFI stub loads the initrd by its iPXE image name (the URL's last segment).
  const initrdName = new URL(images.ramdisk).pathname.split("/").pop() ?? "";
  const words =
    bootMode === "uefi" && initrdName !== ""
      ? [`initrd=${initrdName}`, ...request.kernelWords]
      : request.kernelWords;
  return [
    "#!ipxe",
    `# Anvil: deploy ramdisk for node ${uuid}`,
    ":retry",
    `kernel ${images.kernel} ${words.join(" ")} || goto failed`,
    `initrd ${images.ramdisk} || goto failed`,
    "boot || goto failed",
    ":failed",
    `echo Anvil: loading the deploy ramdisk failed; retrying in ${retryDelaySec} s`,
    `sleep ${retryDelaySec}`,
    "goto retry",
    "",
  ].join("\n");
}

/** The per-MAC script for a deployed node that still network-boots: go to the local disk. */
export function ipxeLocalBootScript(request: { uuid: string; bootMode: BootMode }): string {
  // BIOS: hand over to the first hard disk. UEFI: leave iPXE so the firmware tries its next boot entry.
  const boot = request.bootMode === "uefi" ? "exit" : "sanboot --no-describe --drive 0x80 || exit";
  return ["#!ipxe", `# Anvil: node ${request.uuid} boots from its local disk`, boot, ""].join("\n");
}

/**
 * iPXE over HTTP: every machine fetches boot.ipxe, which chains to nodes/<mac>.ipxe; that script boots
 * the deploy ramdisk (prepareRamdisk) or the local disk (prepareInstance).
 */
export class IpxeBoot implements BootInterface {
  private readonly root: string;
  private readonly defaults: DeployImageDefaults;
  private readonly kernelWords: string[];
  private readonly kernelWordsByArch: ReadonlyMap<string, string[]>;
  private readonly retryDelaySec: number;

  constructor(options: IpxeBootOptions) {
    this.root = options.root;
    this.defaults = options.defaultDeployImages ?? {};
    this.kernelWords = checkKernelWords(options.kernelArgs ?? DEFAULT_KERNEL_WORDS);
    this.kernelWordsByArch = new Map(
      Object.entries(options.kernelArgsByArch ?? {}).map(([arch, words]) => [arch, checkKernelWords(words)]),
    );
    this.retryDelaySec = options.retryDelaySec ?? 10;
  }

  /**
   * Where the script for one MAC lives: nodes/52-54-00-ab-cd-ef.ipxe. Hyphens, not colons: iPXE (at least
   * Debian's 2019 build in QEMU) fails to fetch a relative URI with colons ("Operation not supported").
   */
  nodeScriptPath(mac: Mac): string {
    return pathInside(this.root, `nodes/${macHyphenated(mac)}.ipxe`);
  }

  /** Writes boot.ipxe (idempotent; prepare* calls it too). */
  async start(): Promise<void> {
    await this.writeEntryScript();
  }

  async writeEntryScript(): Promise<void> {
    await writeFileAtomic(pathInside(this.root, "boot.ipxe"), ipxeEntryScript());
  }

  /** @throws InvalidDriverInfo (uuid, ports, deploy images not http(s) URLs) */
  validate(node: DriverNode): void {
    checkedUuid(node.uuid);
    this.kernelWordsFor(node);
    pxeMacs(node);
    const images = deployImagesFor(node, this.defaults);
    requireHttpUrl(images.kernel, "driver_info.deploy_kernel");
    requireHttpUrl(images.ramdisk, "driver_info.deploy_ramdisk");
  }

  /** @throws InvalidDriverInfo (also for agentParams that could break out of the command line) */
  async prepareRamdisk(node: DriverNode, options: { agentParams: Record<string, string> }): Promise<void> {
    this.validate(node);
    const uuid = checkedUuid(node.uuid);
    const images = deployImagesFor(node, this.defaults);
    const agentWords = formatKernelArgs(options.agentParams);
    await this.writeEntryScript();
    for (const mac of pxeMacs(node)) {
      // The script is per MAC, so BOOTIF is written literally rather than left to iPXE's ${net0/mac}.
      const bootif = "BOOTIF" in options.agentParams ? [] : [`BOOTIF=${macPxeName(mac)}`];
      const script = ipxeDeployScript({
        uuid,
        images,
        kernelWords: [...this.kernelWordsFor(node), ...agentWords, ...bootif],
        bootMode: bootModeOf(node),
        retryDelaySec: this.retryDelaySec,
      });
      await writeFileAtomic(this.nodeScriptPath(mac), script);
    }
  }

  /**
   * Writes the discovery script (the deploy ramdisk for machines no node has), or removes it (null): the
   * conductor calls this at start with auto-discovery's setting. @throws InvalidDriverInfo
   */
  async prepareDiscovery(options: { agentParams: Record<string, string> } | null): Promise<void> {
    const path = pathInside(this.root, DISCOVERY_SCRIPT);
    if (options === null) return removeFile(path);
    const images = deployImagesFor({ driver_info: {}, properties: {} }, this.defaults);
    requireHttpUrl(images.kernel, "boot.deploy_kernel");
    requireHttpUrl(images.ramdisk, "boot.deploy_ramdisk");
    const kernelWords = [...this.kernelWords, ...formatKernelArgs(options.agentParams)];
    await writeFileAtomic(
      path,
      ipxeDiscoveryScript({ images, kernelWords, retryDelaySec: this.retryDelaySec }),
    );
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
    await this.removeNodeScripts(node);
  }

  /** @throws InvalidDriverInfo */
  async prepareInstance(node: DriverNode): Promise<void> {
    const uuid = checkedUuid(node.uuid);
    await this.writeEntryScript();
    const script = ipxeLocalBootScript({ uuid, bootMode: bootModeOf(node) });
    for (const mac of pxeMacs(node)) await writeFileAtomic(this.nodeScriptPath(mac), script);
  }

  async cleanUpInstance(node: DriverNode): Promise<void> {
    await this.removeNodeScripts(node);
  }

  private async removeNodeScripts(node: DriverNode): Promise<void> {
    for (const mac of allMacs(node)) await removeFile(this.nodeScriptPath(mac));
  }
}
