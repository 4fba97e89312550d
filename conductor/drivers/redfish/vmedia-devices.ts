import { DriverError } from "../errors.ts";
import type { CallOptions, DriverNode, VirtualMediaInfo, VmediaDevice } from "../out-of-band.ts";
import type { RedfishConnections } from "./client.ts";
import { parseRedfishDriverInfo } from "./driver-info.ts";
import { systemPath } from "./system.ts";
import { ejectCd, insertCd, listSlots, takesMedia, withoutQuery } from "./virtual-media.ts";

/** Ironic's VMEDIA_DEVICES_MAP: the Redfish MediaType each device goes in. */
const MEDIA_TYPES: Record<VmediaDevice, string> = { cdrom: "CD", floppy: "Floppy", disk: "USBStick" };

/**
 * Ironic's redfish attach/detach/get_virtual_media (API 1.89, 1.93): an operator's image in the system's
 * virtual CD, floppy or USB stick. The image URL comes ready for the BMC (the operation publishes `local`
 * images first).
 */
export class RedfishVirtualMediaDevices {
  constructor(private readonly connections: RedfishConnections) {}

  private async slotsOf(node: DriverNode, signal?: AbortSignal) {
    const info = parseRedfishDriverInfo(node.driver_info);
    const client = this.connections.client(info);
    const path = await systemPath(client, info.systemId, signal);
    return { client, slots: await listSlots(client, path, signal) };
  }

  /** @throws InvalidDriverInfo, RedfishError */
  async list(node: DriverNode, options: CallOptions = {}): Promise<VirtualMediaInfo[]> {
    const { slots } = await this.slotsOf(node, options.signal);
    return slots.map(({ media }) => ({
      media_types: [...(media.MediaTypes ?? [])],
      inserted: media.Inserted ?? null,
      image: media.Image ?? null,
    }));
  }

  /**
   * Ejects whatever the device's slots hold, then inserts the image in the first (as Ironic's
   * _insert_vmedia_in_resource). @throws InvalidDriverInfo, RedfishError, DriverError (no such slot, refused)
   */
  async attach(
    node: DriverNode,
    request: { device: VmediaDevice; url: string },
    options: CallOptions = {},
  ): Promise<void> {
    const { signal } = options;
    const { client, slots } = await this.slotsOf(node, signal);
    const usable = slots.filter((slot) => takesMedia(slot, MEDIA_TYPES[request.device]));
    const first = usable[0];
    if (!first)
      throw new DriverError(
        `No suitable virtual media device found for node ${node.uuid} to mount image ${withoutQuery(request.url)}`,
        false,
        { invalidRequest: true },
      );
    for (const slot of usable) await ejectCd(client, slot, signal);
    await insertCd(client, { node: node.uuid, slot: first, image: request.url }, signal);
  }

  /** Ejects the devices' slots, or every slot for null; an empty slot is left alone. @throws RedfishError */
  async detach(
    node: DriverNode,
    devices: readonly VmediaDevice[] | null,
    options: CallOptions = {},
  ): Promise<void> {
    const { signal } = options;
    const { client, slots } = await this.slotsOf(node, signal);
    for (const slot of slots) {
      if (devices === null || devices.some((device) => takesMedia(slot, MEDIA_TYPES[device])))
        await ejectCd(client, slot, signal);
    }
  }
}
