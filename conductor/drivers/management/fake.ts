import type { BootDevice } from "../../../shared/states.ts";
import { BOOT_DEVICES } from "../../../shared/states.ts";
import { Invalid } from "../../errors.ts";
import type { CallOptions, DriverNode, ManagementInterface } from "../interfaces.ts";
import type {
  IndicatorChange,
  IndicatorComponent,
  IndicatorMap,
  IndicatorState,
  VirtualMediaInfo,
  VmediaDevice,
} from "../out-of-band.ts";
import { VMEDIA_DEVICES } from "../out-of-band.ts";

// the Redfish MediaTypes fake-hardware's slots answer with, one slot per device
const FAKE_MEDIA_TYPES: Record<VmediaDevice, string[]> = {
  disk: ["USBStick"],
  cdrom: ["CD", "DVD"],
  floppy: ["Floppy"],
};

// Ironic's fake get_supported_indicators
const FAKE_INDICATORS: IndicatorMap = {
  chassis: { "led-0": { readonly: true, states: ["off", "on"] } },
  system: { led: { readonly: false, states: ["blinking", "off", "on"] } },
};

/** Ironic's fake-hardware management: the boot device in memory per node uuid. */
export class FakeManagement implements ManagementInterface {
  private readonly devices = new Map<string, { boot_device: BootDevice; persistent: boolean }>();

  /** How many NMIs each node was sent (what a test can read back). */
  readonly nmis = new Map<string, number>();

  /** The boot mode and secure boot state each node was last set to (fake-hardware records them). */
  readonly bootModes = new Map<string, "bios" | "uefi">();
  readonly secureBoot = new Map<string, boolean>();

  /** Indicator states set per node ("uuid name@component"); unset ones read "on" as Ironic's fake answers. */
  readonly indicators = new Map<string, IndicatorState>();

  /** The image each node's device holds ("uuid device" → URL): what a test reads back. */
  readonly vmedia = new Map<string, string>();

  validate(_node: DriverNode): void {}

  async getVirtualMedia(node: DriverNode, _options?: CallOptions): Promise<VirtualMediaInfo[]> {
    return Promise.resolve(
      VMEDIA_DEVICES.map((device) => {
        const image = this.vmedia.get(`${node.uuid} ${device}`);
        return {
          media_types: [...FAKE_MEDIA_TYPES[device]],
          inserted: image !== undefined,
          image: image ?? "",
        };
      }),
    );
  }

  async attachVirtualMedia(
    node: DriverNode,
    request: { device: VmediaDevice; url: string },
    _options?: CallOptions,
  ): Promise<void> {
    this.vmedia.set(`${node.uuid} ${request.device}`, request.url);
    return Promise.resolve();
  }

  async detachVirtualMedia(
    node: DriverNode,
    devices: readonly VmediaDevice[] | null,
    _options?: CallOptions,
  ): Promise<void> {
    for (const device of devices ?? VMEDIA_DEVICES) this.vmedia.delete(`${node.uuid} ${device}`);
    return Promise.resolve();
  }

  async getIndicators(_node: DriverNode, _options?: CallOptions): Promise<IndicatorMap> {
    return Promise.resolve(structuredClone(FAKE_INDICATORS));
  }

  async getIndicatorState(
    node: DriverNode,
    indicator: { component: IndicatorComponent; name: string },
    _options?: CallOptions,
  ): Promise<IndicatorState> {
    fakeIndicator(indicator);
    return Promise.resolve(
      this.indicators.get(`${node.uuid} ${indicator.name}@${indicator.component}`) ?? "on",
    );
  }

  async setIndicatorState(
    node: DriverNode,
    indicator: IndicatorChange,
    _options?: CallOptions,
  ): Promise<void> {
    const { state } = indicator;
    const info = fakeIndicator(indicator);
    if (info.readonly || !info.states.includes(state))
      throw new Invalid(`Indicator ${indicator.name}@${indicator.component} cannot be set to ${state}`);
    this.indicators.set(`${node.uuid} ${indicator.name}@${indicator.component}`, state);
    return Promise.resolve();
  }

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

/** Ironic's fake texts for an unknown component or indicator (InvalidParameterValue, 400). */
function fakeIndicator(indicator: { component: IndicatorComponent; name: string }) {
  const byName = FAKE_INDICATORS[indicator.component];
  if (!byName) throw new Invalid(`Invalid component ${indicator.component} specified.`);
  const info = byName[indicator.name];
  if (!info) throw new Invalid(`Invalid indicator ${indicator.name} specified.`);
  return info;
}
