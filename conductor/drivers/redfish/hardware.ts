import type { ConductorConfig } from "../../config.ts";
import type { BootInterface } from "../interfaces.ts";
import type { HardwareType } from "../hardware-type.ts";
import type { DeployInterface, InspectInterface, RaidInterface } from "../interfaces.ts";
import { BootByNode } from "./boot-select.ts";
import { RedfishVirtualMediaBoot, type VirtualMediaBootOptions } from "./boot.ts";
import { RedfishConnections, type RedfishClientOptions } from "./client.ts";
import { bmcClockSteps } from "./clock.ts";
import { RedfishSerialConsole } from "./console.ts";
import { REDFISH_PROPERTIES } from "./driver-info.ts";
import { RedfishInspect } from "./inspect.ts";
import { RedfishManagement } from "./management.ts";
import { RedfishPower } from "./power.ts";

export interface RedfishHardwareParts {
  /** The boot interface the conductor uses for network boot (iPXE or PXE), as for ipmi. */
  boot: BootInterface;
  bootName: string;
  deploy: readonly DeployInterface[];
  inspect: readonly InspectInterface[];
  raid: readonly RaidInterface[];
  client?: RedfishClientOptions;
  /** Poll interval while waiting for power states and tasks (tests shorten it). */
  pollIntervalMs?: number;
  /** Offers the `redfish-virtual-media` boot interface (ISO builder, deploy files, link signer). */
  virtualMedia?: Omit<VirtualMediaBootOptions, "connections">;
}

/**
 * Ironic's `redfish` hardware type: Redfish power, management and out-of-band inspection; network boot and
 * the agent's deploy as for ipmi. `stop()` ends every Redfish session.
 */
export function redfishHardware(_config: ConductorConfig, parts: RedfishHardwareParts): HardwareType {
  const connections = new RedfishConnections(parts.client);
  const management = new RedfishManagement({ connections });
  const redfishInspect = new RedfishInspect(connections);
  const deployNames = parts.deploy.map((d) => d.name);
  const vmedia = parts.virtualMedia
    ? new RedfishVirtualMediaBoot({ ...parts.virtualMedia, connections })
    : undefined;
  const boot = vmedia ? new BootByNode(parts.boot, new Map([[vmedia.name, vmedia]])) : parts.boot;
  return {
    name: "redfish",
    interfaces: {
      bios_interface: "no-bios",
      boot_interface: parts.bootName,
      console_interface: "no-console",
      firmware_interface: "no-firmware",
      deploy_interface: deployNames[0] ?? "direct",
      inspect_interface: "redfish",
      management_interface: "redfish",
      network_interface: "flat",
      power_interface: "redfish",
      raid_interface: parts.raid[0]?.name ?? "no-raid",
      rescue_interface: "no-rescue",
      storage_interface: "noop",
      vendor_interface: "no-vendor",
    },
    power: new RedfishPower({ connections, management, pollIntervalMs: parts.pollIntervalMs }),
    management,
    managementSteps: bmcClockSteps(connections),
    boot,
    deploy: parts.deploy,
    inspect: [redfishInspect, ...parts.inspect],
    raid: parts.raid,
    // as in Ironic, no-console is the default; `--console-interface redfish-serial` relays the BMC's Telnet
    console: [new RedfishSerialConsole({ connections })],
    alternatives: {
      deploy_interface: deployNames.slice(1),
      inspect_interface: parts.inspect.map((i) => i.name),
      raid_interface: parts.raid.slice(1).map((r) => r.name),
      network_interface: ["noop"],
      console_interface: ["redfish-serial"],
      ...(vmedia ? { boot_interface: [vmedia.name] } : {}),
    },
    properties: REDFISH_PROPERTIES,
    stop: () => connections.close(),
  };
}
