import { join } from "node:path";
import type { ConductorConfig } from "../config.ts";
import { FakeBoot } from "./boot/fake.ts";
import { FakeConsole } from "./console/console.ts";
import { agentDeploy } from "./deploy/agent.ts";
import { fakeDeploy } from "./deploy/fake.ts";
import { agentInspect, fakeInspect } from "./inspect/inspect.ts";
import { agentRaidInterface, noRaid } from "./raid/agent.ts";
import { fakeRaid } from "./raid/fake.ts";
import { IpxeBoot } from "./boot/ipxe.ts";
import { PxeBoot } from "./boot/pxe.ts";
import { deployImageDefaultsOf } from "./boot/deploy-images.ts";
import { DEFAULT_KERNEL_WORDS, KERNEL_WORDS_BY_ARCH } from "./boot/kernel-append.ts";
import { driverRegistry, type DriverRegistry, type HardwareType } from "./hardware-type.ts";
import { IpmitoolConsole } from "./ipmi/console.ts";
import { Ipmitool, type IpmitoolOptions } from "./ipmi/ipmitool.ts";
import { RmcpClient } from "./ipmi/rmcp/client.ts";
import { FakeManagement } from "./management/fake.ts";
import { IpmitoolManagement } from "./management/ipmitool.ts";
import { FakePower } from "./power/fake.ts";
import { IpmitoolPower } from "./power/ipmitool.ts";
import type { RedfishClientOptions } from "./redfish/client.ts";
import { redfishHardware } from "./redfish/hardware.ts";
import { VmediaIsoBuilder, vmediaDirOf } from "../images/iso.ts";
import { DeployFiles } from "../images/iso-sources.ts";

/** What the redfish-virtual-media boot needs from the conductor: signed links to what it serves. */
export interface VirtualMediaWiring {
  /** A signed, expiring absolute URL for a path the conductor serves. */
  signedUrl(path: string): string;
}

/** Where the HTTP-served boot files live under the data dir. */
export function httpBootRoot(config: ConductorConfig): string {
  return join(config.dataDir, "http", "boot");
}

export function tftpRoot(config: ConductorConfig): string {
  return join(config.dataDir, "tftp");
}

function agentRaidOf(config: ConductorConfig) {
  return agentRaidInterface({
    deleteConfiguration: config.raid.deleteConfigurationPriority,
    createConfiguration: config.raid.createConfigurationPriority,
  });
}

/** Ironic's fake-hardware: everything succeeds, nothing is touched (demos, scale tests). */
export function fakeHardware(config: ConductorConfig): HardwareType {
  return {
    name: "fake-hardware",
    interfaces: {
      bios_interface: "fake",
      boot_interface: "fake",
      console_interface: "fake",
      deploy_interface: "fake",
      firmware_interface: "no-firmware",
      inspect_interface: "fake",
      management_interface: "fake",
      network_interface: "flat",
      power_interface: "fake",
      raid_interface: "fake",
      rescue_interface: "fake",
      storage_interface: "noop",
      vendor_interface: "fake",
    },
    power: new FakePower({ delayMs: config.fakeDelayMs }),
    management: new FakeManagement(),
    boot: new FakeBoot(),
    deploy: [fakeDeploy, agentDeploy],
    inspect: [fakeInspect, agentInspect],
    raid: [fakeRaid, agentRaidOf(config), noRaid],
    console: [new FakeConsole()],
    // like Ironic's fake-hardware, the agent's in-band interfaces can be mixed with fake power and boot
    alternatives: {
      deploy_interface: ["direct"],
      network_interface: ["noop"],
      inspect_interface: ["agent"],
      raid_interface: ["agent", "no-raid"],
      console_interface: ["no-console"],
    },
    properties: {},
  };
}

function networkBoot(config: ConductorConfig) {
  const defaults = deployImageDefaultsOf(config.boot);
  const kernelArgs = DEFAULT_KERNEL_WORDS;
  const kernelArgsByArch = KERNEL_WORDS_BY_ARCH;
  return config.boot.kind === "ipxe"
    ? new IpxeBoot({
        root: httpBootRoot(config),
        defaultDeployImages: defaults,
        kernelArgs,
        kernelArgsByArch,
      })
    : new PxeBoot({ root: tftpRoot(config), defaultDeployImages: defaults, kernelArgs, kernelArgsByArch });
}

/** Ironic's redfish: Redfish power, management and inspection; network boot and the agent as for ipmi. */
export function redfishHardwareOf(
  config: ConductorConfig,
  options: { client?: RedfishClientOptions; pollIntervalMs?: number; vmedia?: VirtualMediaWiring } = {},
): HardwareType {
  const vmedia = options.vmedia;
  return redfishHardware(config, {
    ...(vmedia
      ? {
          virtualMedia: {
            isos: new VmediaIsoBuilder({ dir: vmediaDirOf(config.dataDir) }),
            files: new DeployFiles({ dir: join(config.dataDir, "vmedia-sources") }),
            signedUrl: (path) => vmedia.signedUrl(path),
            defaultDeployImages: deployImageDefaultsOf(config.boot),
            kernelArgs: DEFAULT_KERNEL_WORDS,
          },
        }
      : {}),
    boot: networkBoot(config),
    bootName: config.boot.kind,
    // fake deploy is offered as Ironic offers it wherever it is enabled (tests, demos)
    deploy: [agentDeploy, fakeDeploy],
    inspect: [agentInspect, fakeInspect],
    raid: [noRaid, agentRaidOf(config)],
    client: options.client,
    pollIntervalMs: options.pollIntervalMs,
  });
}

/** The real thing: ipmitool power and boot device, iPXE (or PXE) boot, the agent for deploy, inspect and RAID. */
export function ipmiHardware(config: ConductorConfig, ipmitoolOptions: IpmitoolOptions = {}): HardwareType {
  const ipmitool = new Ipmitool(ipmitoolOptions);
  // status reads go native unless configured otherwise; the same metrics hook sees both
  const statusClient =
    config.ipmi.statusClient === "native" ? new RmcpClient({ onCall: ipmitoolOptions.onCall }) : undefined;
  return {
    name: "ipmi",
    interfaces: {
      bios_interface: "no-bios",
      boot_interface: config.boot.kind,
      console_interface: "no-console",
      deploy_interface: "direct",
      firmware_interface: "no-firmware",
      inspect_interface: "agent",
      management_interface: "ipmitool",
      network_interface: "flat",
      power_interface: "ipmitool",
      raid_interface: "no-raid",
      rescue_interface: "no-rescue",
      storage_interface: "noop",
      vendor_interface: "ipmitool",
    },
    power: new IpmitoolPower({ ipmitool, statusClient }),
    management: new IpmitoolManagement({ ipmitool }),
    boot: networkBoot(config),
    deploy: [agentDeploy],
    inspect: [agentInspect],
    // NOTE: as in Ironic, no-raid is the default; `--raid-interface agent` builds software RAID in band
    raid: [noRaid, agentRaidOf(config)],
    // as in Ironic, no-console is the default; `--console-interface ipmitool-socat` serves Serial-over-LAN
    console: [new IpmitoolConsole({ ipmitool })],
    // flat records VIFs on ports (Ironic's default where it is enabled); noop records nothing
    alternatives: {
      raid_interface: ["agent"],
      network_interface: ["noop"],
      console_interface: ["ipmitool-socat"],
    },
    properties: {
      ipmi_address: "IP address or hostname of the node's BMC. Required.",
      ipmi_port: "UDP port of the BMC. Optional, default 623.",
      ipmi_username: "BMC user name. Optional.",
      ipmi_password: "BMC password. Optional.",
      ipmi_priv_level: "Privilege level: ADMINISTRATOR (default), OPERATOR, USER, CALLBACK.",
      ipmi_cipher_suite: "IPMI 2.0 cipher suite. Optional, default 3.",
      ipmi_terminal_port: "Serial-over-LAN terminal port. Optional.",
      deploy_kernel: "URL of the deploy kernel. Required unless the conductor has a default.",
      deploy_ramdisk: "URL of the deploy ramdisk. Required unless the conductor has a default.",
    },
    stop: async () => statusClient?.close(),
  };
}

/** The hardware types a conductor offers; `ipmitool` options reach the BMC runner (metrics hooks). */
export function defaultDrivers(
  config: ConductorConfig,
  options: { ipmitool?: IpmitoolOptions; redfish?: RedfishClientOptions; vmedia?: VirtualMediaWiring } = {},
): DriverRegistry {
  return driverRegistry([
    fakeHardware(config),
    ipmiHardware(config, options.ipmitool),
    redfishHardwareOf(config, { client: options.redfish, vmedia: options.vmedia }),
  ]);
}
