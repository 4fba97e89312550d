import type { NodeRecord } from "../../shared/resources.ts";
import { Invalid } from "../errors.ts";
import type { ConsoleInterface } from "./console/console.ts";
import type {
  BootInterface,
  DeployInterface,
  InspectInterface,
  ManagementInterface,
  PowerInterface,
  RaidInterface,
} from "./interfaces.ts";
import type { Step } from "./step.ts";

/** Interface names a node shows in its *_interface fields. */
export interface InterfaceNames {
  bios_interface: string;
  boot_interface: string;
  console_interface: string;
  deploy_interface: string;
  /** 1.86; "no-firmware" everywhere: Anvil updates no firmware */
  firmware_interface: string;
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
  /** Every deploy, inspect and raid implementation the type supports; a node picks one by its *_interface. */
  deploy: readonly DeployInterface[];
  inspect: readonly InspectInterface[];
  raid: readonly RaidInterface[];
  /**
   * Steps its management interface declares (Ironic's management.* clean steps: set_bmc_clock). The
   * out-of-band interfaces sit below the step layer, so the type lists them beside the interface.
   */
  managementSteps?: readonly Step[];
  /** The serial consoles the type offers (none: only `no-console`); a node picks one by console_interface. */
  console?: readonly ConsoleInterface[];
  /** Other values a node may choose for an interface field (besides the default). */
  alternatives: Partial<Record<keyof InterfaceNames, readonly string[]>>;
  /** driver_info keys this type reads, with a description: served at /v1/drivers/{name}/properties */
  properties: Record<string, string>;
  /** Releases what the type holds open (BMC sessions, pooled connections) when the conductor stops. */
  stop?(): Promise<void>;
}

/** The interfaces a node works through: its hardware type's, as its *_interface fields choose. */
export interface NodeInterfaces {
  deploy: DeployInterface;
  inspect: InspectInterface;
  raid: RaidInterface;
  /** The hardware type's management steps (none: absent) */
  managementSteps?: readonly Step[];
}

function pick<T extends { name: string }>(choices: readonly T[], name: string, field: string): T {
  const found = choices.find((c) => c.name === name);
  if (!found)
    throw new Invalid(`Interface ${field} "${name}" is not supported by this node's hardware type.`);
  return found;
}

/** @throws Invalid when a node names an interface its hardware type does not implement */
export function nodeInterfaces(
  hw: HardwareType,
  node: Pick<NodeRecord, "deploy_interface" | "inspect_interface" | "raid_interface">,
): NodeInterfaces {
  return {
    deploy: pick(hw.deploy, node.deploy_interface, "deploy_interface"),
    inspect: pick(hw.inspect, node.inspect_interface, "inspect_interface"),
    raid: pick(hw.raid, node.raid_interface, "raid_interface"),
    managementSteps: hw.managementSteps ?? [],
  };
}

/** The node's serial console, or undefined for `no-console` (or a name the type does not offer). */
export function consoleOf(
  hw: HardwareType,
  node: Pick<NodeRecord, "console_interface">,
): ConsoleInterface | undefined {
  return hw.console?.find((c) => c.name === node.console_interface);
}

export interface DriverRegistry {
  get(name: string): HardwareType | undefined;
  list(): readonly HardwareType[];
}

export function driverRegistry(types: readonly HardwareType[]): DriverRegistry {
  const byName = new Map(types.map((t) => [t.name, t]));
  return { get: (name) => byName.get(name), list: () => types };
}
