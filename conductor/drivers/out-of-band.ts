import type { JsonObject } from "../../shared/resources.ts";
import type { BootDevice, NodeHealth, PowerState } from "../../shared/states.ts";

/** What a driver may read of a node: a snapshot, never a live row. */
export interface DriverNode {
  uuid: string;
  name: string | null;
  driver_info: Record<string, unknown>;
  properties: Record<string, unknown>;
  instance_info: Record<string, unknown>;
  driver_internal_info: Record<string, unknown>;
  ports: { address: string; pxe_enabled: boolean }[];
  /** the boot mode recorded on the node (set on create, PATCH or PUT …/states/boot_mode), if any */
  boot_mode?: string | null;
  /** the node's boot_interface (a hardware type offering several picks by it) */
  boot_interface?: string;
  /** the node's network_data (API 1.66): what a ramdisk booted without DHCP configures itself from */
  network_data?: JsonObject;
  /** API 1.95: the node must never be powered off, so a reboot is a reset (Ironic's power drivers) */
  disable_power_off?: boolean | null;
  /** the power state recorded on the node (fake-hardware's power answers it, as Ironic's does) */
  power_state?: PowerState | null;
}

export interface CallOptions {
  signal?: AbortSignal;
}

/** An indicator's state (Ironic's indicator_states). */
export type IndicatorState = "on" | "off" | "blinking" | "unknown";
/** A component that carries indicators (Ironic's components). */
export type IndicatorComponent = "system" | "chassis" | "disk" | "power" | "nic";
/** What one indicator offers: the states it may be set to, or readonly. */
export interface IndicatorInfo {
  readonly: boolean;
  states: IndicatorState[];
}
/** One indicator set to a state. */
export interface IndicatorChange {
  component: IndicatorComponent;
  name: string;
  state: Exclude<IndicatorState, "unknown">;
}
/** Ironic's get_supported_indicators: component → indicator name → what it offers. */
export type IndicatorMap = Partial<Record<IndicatorComponent, Record<string, IndicatorInfo>>>;

/** A virtual media device an image can be attached as (Ironic's boot_devices.VMEDIA_DEVICES, its order). */
export const VMEDIA_DEVICES = ["disk", "cdrom", "floppy"] as const;
export type VmediaDevice = (typeof VMEDIA_DEVICES)[number];

/** One virtual media slot of the BMC as Ironic's get_virtual_media lists it. */
export interface VirtualMediaInfo {
  media_types: string[];
  inserted: boolean | null;
  image: string | null;
}

/** Switches a node on and off through its BMC. */
export interface PowerInterface {
  /** @throws InvalidDriverInfo when driver_info lacks or mangles what this interface needs. */
  validate(node: DriverNode): void;
  /** null: the driver cannot tell (fake-hardware's node never powered, Ironic's None). @throws DriverError */
  getPowerState(node: DriverNode, options?: CallOptions): Promise<PowerState | null>;
  /**
   * The power state and, from the same answer of the BMC, the hardware's health (Ironic's get_node_health,
   * API 1.109): drivers whose BMC reports one implement it, and the power sync then keeps `health`.
   * @throws DriverError
   */
  getPowerStatus?(
    node: DriverNode,
    options?: CallOptions,
  ): Promise<{ power: PowerState | null; health: NodeHealth | null }>;
  /** Resolves once the BMC reports the target state. @throws DriverError */
  setPowerState(
    node: DriverNode,
    target: PowerState,
    options?: CallOptions & { soft?: boolean },
  ): Promise<void>;
  reboot(node: DriverNode, options?: CallOptions & { soft?: boolean }): Promise<void>;
}

/** Boot device and other out-of-band management. */
export interface ManagementInterface {
  validate(node: DriverNode): void;
  supportedBootDevices(): readonly BootDevice[];
  setBootDevice(
    node: DriverNode,
    request: { device: BootDevice; persistent: boolean },
    options?: CallOptions,
  ): Promise<void>;
  getBootDevice(
    node: DriverNode,
    options?: CallOptions,
  ): Promise<{ boot_device: BootDevice | null; persistent: boolean | null }>;
  /** Sends the node a non-maskable interrupt (a crash dump in its OS): Ironic's inject_nmi. */
  injectNmi(node: DriverNode, options?: CallOptions): Promise<void>;
  /** Sets the boot mode the next boot uses (Ironic's set_boot_mode); absent where the driver cannot. */
  setBootMode?(node: DriverNode, mode: "bios" | "uefi", options?: CallOptions): Promise<void>;
  /** Turns UEFI secure boot on or off (Ironic's set_secure_boot_state); absent where the driver cannot. */
  setSecureBoot?(node: DriverNode, on: boolean, options?: CallOptions): Promise<void>;
  /** The node's indicators (LEDs) by component (Ironic's get_supported_indicators); absent where none. */
  getIndicators?(node: DriverNode, options?: CallOptions): Promise<IndicatorMap>;
  /** @throws Invalid for an indicator the node does not have (Ironic's MissingParameterValue) */
  getIndicatorState?(
    node: DriverNode,
    indicator: { component: IndicatorComponent; name: string },
    options?: CallOptions,
  ): Promise<IndicatorState>;
  /** @throws Invalid for an unknown indicator or a state it does not offer */
  setIndicatorState?(node: DriverNode, change: IndicatorChange, options?: CallOptions): Promise<void>;
  /** The BMC's virtual media slots (Ironic's get_virtual_media); absent where the driver has none. */
  getVirtualMedia?(node: DriverNode, options?: CallOptions): Promise<VirtualMediaInfo[]>;
  /**
   * Inserts the image at `url` (already reachable by the BMC) as `device`, ejecting what that slot held
   * (Ironic's attach_virtual_media). @throws DriverError (no such slot, mount refused)
   */
  attachVirtualMedia?(
    node: DriverNode,
    request: { device: VmediaDevice; url: string },
    options?: CallOptions,
  ): Promise<void>;
  /** Ejects the devices named, or every slot for null (Ironic's detach_virtual_media). @throws DriverError */
  detachVirtualMedia?(
    node: DriverNode,
    devices: readonly VmediaDevice[] | null,
    options?: CallOptions,
  ): Promise<void>;
}

/** Makes the node boot the deploy ramdisk, or its own disk afterwards. */
export interface BootInterface {
  /** Called once when the conductor starts: files every node needs (the iPXE entry script). */
  start?(): Promise<void>;
  validate(node: DriverNode): void;
  /** The device the node boots the ramdisk from (set once before the power cycle). Absent: pxe. */
  ramdiskBootDevice?(node: DriverNode): BootDevice;
  /** Writes the node's ramdisk boot configuration; agentParams become kernel arguments. */
  prepareRamdisk(
    node: DriverNode,
    options: { agentParams: Record<string, string>; signal?: AbortSignal },
  ): Promise<void>;
  /** Removes every boot file written for the node (idempotent). */
  cleanUpRamdisk(node: DriverNode): Promise<void>;
  /**
   * Auto-discovery: boots machines no node has into the deploy ramdisk with these agent parameters, or stops
   * doing so (null). Absent: the interface cannot boot unknown machines (virtual media needs a node's BMC).
   */
  prepareDiscovery?(options: { agentParams: Record<string, string> } | null): Promise<void>;
  /** Makes the next boot come from the local disk. */
  prepareInstance(node: DriverNode): Promise<void>;
  cleanUpInstance(node: DriverNode): Promise<void>;
}
