import type { JsonObject } from "../../../shared/resources.ts";
import type { BootDevice } from "../../../shared/states.ts";
import type { VmediaIsoBuilder } from "../../images/iso.ts";
import { IsoBuildError } from "../../images/iso.ts";
import type { DeployFiles } from "../../images/iso-sources.ts";
import { deployImagesFor, type DeployImageDefaults } from "../boot/deploy-images.ts";
import { DEFAULT_KERNEL_WORDS, ramdiskKernelWords } from "../boot/kernel-append.ts";
import { checkKernelWords, formatKernelArgs } from "../boot/kernel-args.ts";
import { isMac, macPxeName, normalizeMac } from "../boot/mac.ts";
import { checkedUuid } from "../boot/node-uuid.ts";
import { DriverError } from "../errors.ts";
import type { BootInterface, DriverNode } from "../interfaces.ts";
import type { RedfishConnections } from "./client.ts";
import { parseRedfishDriverInfo } from "./driver-info.ts";
import { systemPath } from "./system.ts";
import { ejectCd, findCdSlot, insertCd, withoutQuery, type CdSlot } from "./virtual-media.ts";

/** The URL path ISOs are served under (signed links only). */
export const VMEDIA_PREFIX = "/vmedia";
const ISO_IN_URL = /\/vmedia\/(vmedia-[0-9a-f]{32}\.iso)(?:\?|$)/;

export interface VirtualMediaBootOptions {
  connections: RedfishConnections;
  isos: VmediaIsoBuilder;
  files: DeployFiles;
  /** A signed, expiring absolute URL for a path this conductor serves (`/vmedia/<name>`). */
  signedUrl(path: string): string;
  /** Used when driver_info has no deploy_kernel / deploy_ramdisk. */
  defaultDeployImages?: DeployImageDefaults;
  /** Words on every deploy kernel command line (consoles). */
  kernelArgs?: readonly string[];
}

/** The node's network_data for the ISO, or null when none is set (the ramdisk then falls back to DHCP). */
function networkDataOf(node: DriverNode): JsonObject | null {
  const data = node.network_data;
  return data && Object.keys(data).length > 0 ? data : null;
}

/**
 * Ironic's `redfish-virtual-media` boot: the deploy ramdisk boots from an ISO the BMC inserts in its virtual
 * CD from a signed, expiring URL on this conductor; the ISO carries the node's network_data, so the ramdisk
 * needs no DHCP. The instance boots from its disk as with network boot.
 */
export class RedfishVirtualMediaBoot implements BootInterface {
  readonly name = "redfish-virtual-media";
  private readonly kernelWords: string[];
  private readonly defaults: DeployImageDefaults;
  // the ISO each node holds; a restart forgets it, so clean-up also reads it back from the slot's Image URL
  private readonly held = new Map<string, string>();

  constructor(private readonly options: VirtualMediaBootOptions) {
    this.kernelWords = checkKernelWords(options.kernelArgs ?? DEFAULT_KERNEL_WORDS);
    this.defaults = options.defaultDeployImages ?? {};
  }

  ramdiskBootDevice(): BootDevice {
    return "cdrom";
  }

  /** @throws InvalidDriverInfo (redfish fields, deploy images) */
  validate(node: DriverNode): void {
    checkedUuid(node.uuid);
    parseRedfishDriverInfo(node.driver_info);
    deployImagesFor(node, this.defaults);
    ramdiskKernelWords(node, this.kernelWords);
  }

  /**
   * Builds (or reuses) the node's ISO, ejects whatever the CD slot holds and inserts the ISO's signed URL.
   * @throws InvalidDriverInfo, DriverError (no CD slot, mount refused, ISO build failed), RedfishError
   */
  async prepareRamdisk(
    node: DriverNode,
    options: { agentParams: Record<string, string>; signal?: AbortSignal },
  ): Promise<void> {
    this.validate(node);
    const { signal } = options;
    const images = deployImagesFor(node, this.defaults);
    const bootif = "BOOTIF" in options.agentParams ? undefined : this.bootifOf(node);
    const words = [
      ...ramdiskKernelWords(node, this.kernelWords),
      ...formatKernelArgs(options.agentParams),
      "anvil.netconfig=vmedia",
      ...(bootif ? [`BOOTIF=${bootif}`] : []),
    ];
    let iso;
    try {
      const kernel = await this.options.files.local(images.kernel, signal);
      const ramdisk = await this.options.files.local(images.ramdisk, signal);
      iso = await this.options.isos.acquire(
        node.uuid,
        { kernel, ramdisk, kernelWords: words, networkData: networkDataOf(node) },
        signal,
      );
    } catch (error) {
      if (error instanceof IsoBuildError)
        throw new DriverError(
          `Failed to prepare the virtual media ISO for node ${node.uuid}: ${error.message}`,
        );
      throw error;
    }
    const previous = this.held.get(node.uuid);
    this.held.set(node.uuid, iso.name);
    const url = this.options.signedUrl(`${VMEDIA_PREFIX}/${iso.name}`);
    const { client, slot } = await this.slotOf(node, url, signal);
    await ejectCd(client, slot, signal);
    if (previous && previous !== iso.name) await this.options.isos.release(node.uuid, previous);
    await insertCd(client, { node: node.uuid, slot, image: url }, signal);
  }

  /** Ejects the CD and deletes the node's ISO (idempotent). @throws InvalidDriverInfo, RedfishError */
  async cleanUpRamdisk(node: DriverNode): Promise<void> {
    await this.ejectAll(node);
  }

  /** The instance boots from its disk (the deploy sets the boot device); nothing may stay in the slot. */
  async prepareInstance(node: DriverNode): Promise<void> {
    await this.ejectAll(node);
  }

  async cleanUpInstance(node: DriverNode): Promise<void> {
    await this.ejectAll(node);
  }

  private async ejectAll(node: DriverNode): Promise<void> {
    const { client, slot } = await this.slotOf(node, null);
    const fromSlot = ISO_IN_URL.exec(slot.media.Image ?? "")?.[1];
    await ejectCd(client, slot);
    for (const name of new Set([this.held.get(node.uuid), fromSlot])) {
      if (name) await this.options.isos.release(node.uuid, name);
    }
    this.held.delete(node.uuid);
  }

  private async slotOf(node: DriverNode, image: string | null, signal?: AbortSignal) {
    const info = parseRedfishDriverInfo(node.driver_info);
    const client = this.options.connections.client(info);
    const path = await systemPath(client, info.systemId, signal);
    const slot: CdSlot | null = await findCdSlot(client, path, signal);
    if (!slot) {
      throw new DriverError(
        image === null
          ? `No suitable virtual media device found for node ${node.uuid}`
          : `No suitable virtual media device found for node ${node.uuid} to mount image ${withoutQuery(image)}`,
      );
    }
    return { client, slot };
  }

  private bootifOf(node: DriverNode): string | undefined {
    const port =
      node.ports.find((p) => p.pxe_enabled && isMac(p.address)) ?? node.ports.find((p) => isMac(p.address));
    return port ? macPxeName(normalizeMac(port.address)) : undefined;
  }
}
