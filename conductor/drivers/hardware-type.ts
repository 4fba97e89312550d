import type { BootInterface, ManagementInterface, PowerInterface } from "./interfaces.ts";

/** Interface names a node shows in its *_interface fields. */
export interface InterfaceNames {
  bios_interface: string;
  boot_interface: string;
  console_interface: string;
  deploy_interface: string;
  inspect_interface: string;
  management_interface: string;
  network_interface: string;
  power_interface: string;
  raid_interface: string;
  rescue_interface: string;
  storage_interface: string;
  vendor_interface: string;
}

/** A hardware type: small per-concern interfaces composed under one driver name (Ironic's model). */
export interface HardwareType {
  name: string;
  interfaces: InterfaceNames;
  power: PowerInterface;
  management: ManagementInterface;
  boot: BootInterface;
  /** Other values a node may choose for an interface field (besides the default). */
  alternatives: Partial<Record<keyof InterfaceNames, readonly string[]>>;
  /** driver_info keys this type reads, with a description: served at /v1/drivers/{name}/properties */
  properties: Record<string, string>;
}

export interface DriverRegistry {
  get(name: string): HardwareType | undefined;
  list(): readonly HardwareType[];
}

export function driverRegistry(types: readonly HardwareType[]): DriverRegistry {
  const byName = new Map(types.map((t) => [t.name, t]));
  return { get: (name) => byName.get(name), list: () => types };
}
