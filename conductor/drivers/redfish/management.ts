import { setTimeout as sleep } from "node:timers/promises";
import type { BootDevice } from "../../../shared/states.ts";
import { bootModeOf } from "../boot/boot-mode.ts";
import { DriverError } from "../errors.ts";
import type { CallOptions, DriverNode, ManagementInterface } from "../interfaces.ts";
import type {
  IndicatorChange,
  IndicatorComponent,
  IndicatorMap,
  IndicatorState,
  VirtualMediaInfo,
  VmediaDevice,
} from "../out-of-band.ts";
import { RedfishIndicators } from "./indicators.ts";
import { RedfishVirtualMediaDevices } from "./vmedia-devices.ts";
import { RedfishError, type RedfishConnections } from "./client.ts";
import { parseRedfishDriverInfo } from "./driver-info.ts";
import { postReset, type BootRestorer } from "./reset.ts";
import { SecureBootSchema } from "./schemas.ts";
import { loadSystem, type SystemView } from "./system.ts";

const TARGETS: Record<Exclude<BootDevice, "safe">, string> = {
  pxe: "Pxe",
  disk: "Hdd",
  cdrom: "Cd",
  bios: "BiosSetup",
};
const SUPPORTED = Object.keys(TARGETS) as BootDevice[];

export type BootMode = "uefi" | "bios";

export interface RedfishManagementOptions {
  connections: RedfishConnections;
  /** Pause between retries of a boot change the BMC refuses during POST. Default 5 s. */
  postRetryDelayMs?: number;
  postRetries?: number;
}

function deviceOf(target: string | null | undefined): BootDevice | null {
  const entry = Object.entries(TARGETS).find(([, value]) => value === target);
  return entry ? (entry[0] as BootDevice) : null;
}

/** Ironic's RedfishManagement: boot device and mode through Boot.BootSourceOverride*, NMI, LED, secure boot. */
export class RedfishManagement implements ManagementInterface, BootRestorer {
  private readonly connections: RedfishConnections;
  // nodes whose BMC refused a Continuous override: the device is set again (Once) before each power on, as
  // Ironic keeps redfish_boot_device; NOTE: held in memory, so a conductor restart forgets it
  private readonly onceFallback = new Map<string, BootDevice>();
  private readonly indicators: RedfishIndicators;
  private readonly vmedia: RedfishVirtualMediaDevices;

  constructor(private readonly options: RedfishManagementOptions) {
    this.connections = options.connections;
    this.indicators = new RedfishIndicators(options.connections);
    this.vmedia = new RedfishVirtualMediaDevices(options.connections);
  }

  /** @throws InvalidDriverInfo */
  validate(node: DriverNode): void {
    parseRedfishDriverInfo(node.driver_info);
  }

  supportedBootDevices(): readonly BootDevice[] {
    return SUPPORTED;
  }

  /**
   * PATCHes Boot.BootSourceOverrideTarget/Enabled (and Mode where the node's boot mode differs, or the
   * vendor wants every field). A BMC that refuses Continuous gets Once, set again before every power on.
   * @throws InvalidDriverInfo, RedfishError, DriverError for a device the system does not offer
   */
  async setBootDevice(
    node: DriverNode,
    request: { device: BootDevice; persistent: boolean },
    options: CallOptions = {},
  ): Promise<void> {
    const view = await loadSystem(this.connections, node, options.signal);
    const target = request.device === "safe" ? undefined : TARGETS[request.device];
    const allowed = view.system.Boot?.["BootSourceOverrideTarget@Redfish.AllowableValues"];
    if (!target || (allowed && !allowed.includes(target))) {
      // Ironic's InvalidParameterValue text (ipmitool's, redfish's map lookup): a 400, the request's fault
      throw new DriverError(
        `Invalid boot device ${request.device} specified: Redfish system ${view.path} does not support boot device ${request.device}`,
        false,
        { invalidRequest: true },
      );
    }
    this.onceFallback.delete(node.uuid);
    try {
      await this.patchBoot(node, view, {
        target,
        enabled: request.persistent ? "Continuous" : "Once",
        signal: options.signal,
      });
    } catch (error) {
      if (!request.persistent || !(error instanceof RedfishError) || error.status !== 400) throw error;
      await this.patchBoot(node, view, { target, enabled: "Once", signal: options.signal });
      this.onceFallback.set(node.uuid, request.device);
    }
  }

  /** @throws InvalidDriverInfo, RedfishError */
  async getBootDevice(
    node: DriverNode,
    options: CallOptions = {},
  ): Promise<{ boot_device: BootDevice | null; persistent: boolean | null }> {
    const fallback = this.onceFallback.get(node.uuid);
    if (fallback) return { boot_device: fallback, persistent: true };
    const boot = (await loadSystem(this.connections, node, options.signal)).system.Boot;
    const enabled = boot?.BootSourceOverrideEnabled;
    if (!boot || enabled === "Disabled") return { boot_device: null, persistent: null };
    return {
      boot_device: deviceOf(boot.BootSourceOverrideTarget),
      persistent: enabled === "Continuous" ? true : enabled === "Once" ? false : null,
    };
  }

  /** ResetType Nmi. @throws InvalidDriverInfo, RedfishError, DriverError when the system offers no Nmi */
  async injectNmi(node: DriverNode, options: CallOptions = {}): Promise<void> {
    const view = await loadSystem(this.connections, node, options.signal);
    await postReset(view, ["Nmi"], { signal: options.signal, taskTimeoutMs: 60_000, pollIntervalMs: 1000 });
  }

  /** Sets the one-time device again where Continuous was refused (called before a power on). */
  async restoreBootDevice(node: DriverNode, view: SystemView, signal?: AbortSignal): Promise<void> {
    const device = this.onceFallback.get(node.uuid);
    if (!device || device === "safe") return;
    await this.patchBoot(node, view, { target: TARGETS[device], enabled: "Once", signal: signal });
  }

  /** @throws InvalidDriverInfo, RedfishError */
  async getBootMode(node: DriverNode, options: CallOptions = {}): Promise<BootMode | null> {
    const mode = (await loadSystem(this.connections, node, options.signal)).system.Boot
      ?.BootSourceOverrideMode;
    return mode === "UEFI" ? "uefi" : mode === "Legacy" ? "bios" : null;
  }

  /** @throws InvalidDriverInfo, RedfishError, DriverError when the system has no BootSourceOverrideMode */
  async setBootMode(node: DriverNode, mode: BootMode, options: CallOptions = {}): Promise<void> {
    const view = await loadSystem(this.connections, node, options.signal);
    const boot = view.system.Boot;
    if (!boot || boot.BootSourceOverrideMode === undefined)
      throw new DriverError(`Redfish system ${view.path} does not support setting the boot mode`);
    const value = mode === "uefi" ? "UEFI" : "Legacy";
    const allowed = boot["BootSourceOverrideMode@Redfish.AllowableValues"];
    if (allowed && !allowed.includes(value))
      throw new DriverError(`Redfish system ${view.path} does not support boot mode ${mode}`);
    const patch: Record<string, string> = { BootSourceOverrideMode: value };
    if (view.quirks.fullBootRequest || view.quirks.alwaysSendOverrideEnabled) {
      if (boot.BootSourceOverrideTarget) patch.BootSourceOverrideTarget = boot.BootSourceOverrideTarget;
      if (boot.BootSourceOverrideEnabled) patch.BootSourceOverrideEnabled = boot.BootSourceOverrideEnabled;
    }
    await view.client.request({
      method: "PATCH",
      path: view.path,
      body: { Boot: patch },
      signal: options.signal,
    });
  }

  /** The System's and its Chassis' indicators (IndicatorLED, or LocationIndicatorActive). @throws RedfishError */
  async getIndicators(node: DriverNode, options: CallOptions = {}): Promise<IndicatorMap> {
    return this.indicators.list(node, options);
  }

  /** @throws Invalid (unknown indicator), RedfishError */
  async getIndicatorState(
    node: DriverNode,
    indicator: { component: IndicatorComponent; name: string },
    options: CallOptions = {},
  ): Promise<IndicatorState> {
    return this.indicators.get(node, indicator, options);
  }

  /** @throws Invalid (unknown indicator, a state it does not offer), RedfishError */
  async setIndicatorState(
    node: DriverNode,
    change: IndicatorChange,
    options: CallOptions = {},
  ): Promise<void> {
    await this.indicators.set(node, change, options);
  }

  /** Every VirtualMedia slot of the system (or its managers). @throws RedfishError */
  async getVirtualMedia(node: DriverNode, options: CallOptions = {}): Promise<VirtualMediaInfo[]> {
    return this.vmedia.list(node, options);
  }

  /** @throws RedfishError, DriverError (no slot for the device, mount refused) */
  async attachVirtualMedia(
    node: DriverNode,
    request: { device: VmediaDevice; url: string },
    options: CallOptions = {},
  ): Promise<void> {
    await this.vmedia.attach(node, request, options);
  }

  /** @throws RedfishError */
  async detachVirtualMedia(
    node: DriverNode,
    devices: readonly VmediaDevice[] | null,
    options: CallOptions = {},
  ): Promise<void> {
    await this.vmedia.detach(node, devices, options);
  }

  /** SecureBoot.SecureBootEnable. @throws RedfishError, DriverError where the system has no SecureBoot */
  async getSecureBoot(node: DriverNode, options: CallOptions = {}): Promise<boolean> {
    const { view, path } = await this.secureBootOf(node, options.signal);
    return (await view.client.get(path, SecureBootSchema, options.signal)).SecureBootEnable === true;
  }

  /** @throws RedfishError, DriverError where the system has no SecureBoot */
  async setSecureBoot(node: DriverNode, enabled: boolean, options: CallOptions = {}): Promise<void> {
    const { view, path } = await this.secureBootOf(node, options.signal);
    await view.client.request({
      method: "PATCH",
      path,
      body: { SecureBootEnable: enabled },
      signal: options.signal,
    });
  }

  private async secureBootOf(
    node: DriverNode,
    signal?: AbortSignal,
  ): Promise<{ view: SystemView; path: string }> {
    const view = await loadSystem(this.connections, node, signal);
    const path = view.system.SecureBoot?.["@odata.id"];
    if (!path) throw new DriverError(`Redfish system ${view.path} does not support UEFI secure boot`);
    return { view, path };
  }

  private async patchBoot(
    node: DriverNode,
    view: SystemView,
    request: { target: string; enabled: "Once" | "Continuous"; signal: AbortSignal | undefined },
  ): Promise<void> {
    const { signal } = request;
    const boot = view.system.Boot ?? {};
    const patch: Record<string, string> = { BootSourceOverrideTarget: request.target };
    if (
      view.quirks.alwaysSendOverrideEnabled ||
      view.quirks.fullBootRequest ||
      boot.BootSourceOverrideEnabled !== request.enabled
    )
      patch.BootSourceOverrideEnabled = request.enabled;
    // NOTE: a system without BootSourceOverrideMode is left so (Ironic: not fatal, older partial services)
    if (boot.BootSourceOverrideMode !== undefined && boot.BootSourceOverrideMode !== null) {
      const mode = bootModeOf(node) === "uefi" ? "UEFI" : "Legacy";
      if (view.quirks.fullBootRequest || boot.BootSourceOverrideMode !== mode)
        patch.BootSourceOverrideMode = mode;
    }
    const retries = view.quirks.retryBootDuringPost ? (this.options.postRetries ?? 6) : 0;
    for (let attempt = 0; ; attempt++) {
      try {
        await view.client.request({ method: "PATCH", path: view.path, body: { Boot: patch }, signal });
        return;
      } catch (error) {
        const duringPost =
          error instanceof RedfishError &&
          error.status === 400 &&
          error.detail.includes("UnableToModifyDuringSystemPOST");
        if (!duringPost || attempt >= retries) throw error;
        await sleep(this.options.postRetryDelayMs ?? 5000, undefined, { signal });
      }
    }
  }
}
