import type { BootDevice } from "../../../shared/states.ts";
import { BOOT_DEVICES } from "../../../shared/states.ts";
import type { CallOptions, DriverNode, ManagementInterface } from "../interfaces.ts";

/** Ironic's fake-hardware management: the boot device in memory per node uuid. */
export class FakeManagement implements ManagementInterface {
  private readonly devices = new Map<string, { boot_device: BootDevice; persistent: boolean }>();

  /** How many NMIs each node was sent (what a test can read back). */
  readonly nmis = new Map<string, number>();

  /** The boot mode and secure boot state each node was last set to (fake-hardware records them). */
  readonly bootModes = new Map<string, "bios" | "uefi">();
  readonly secureBoot = new Map<string, boolean>();

  validate(_node: DriverNode): void {}

  async setBootMode(node: DriverNode, mode: "bios" | "uefi", _options?: CallOptions): Promise<void> {
    this.bootModes.set(node.uuid, mode);
    return Promise.resolve();
  }

  async setSecureBoot(node: DriverNode, on: boolean, _options?: CallOptions): Promise<void> {
    this.secureBoot.set(node.uuid, on);
    return Promise.resolve();
  }

  async injectNmi(node: DriverNode, _options?: CallOptions): Promise<void> {
    this.nmis.set(node.uuid, (this.nmis.get(node.uuid) ?? 0) + 1);
    return Promise.resolve();
  }

  supportedBootDevices(): readonly BootDevice[] {
    return BOOT_DEVICES;
  }

  async setBootDevice(
    node: DriverNode,
    request: { device: BootDevice; persistent: boolean },
    _options?: CallOptions,
  ): Promise<void> {
    this.devices.set(node.uuid, { boot_device: request.device, persistent: request.persistent });
    return Promise.resolve();
  }

  async getBootDevice(
    node: DriverNode,
    _options?: CallOptions,
  ): Promise<{ boot_device: BootDevice | null; persistent: boolean | null }> {
    return Promise.resolve(this.devices.get(node.uuid) ?? { boot_device: null, persistent: null });
  }
}
