import { writeFile } from "node:fs/promises";
import { LinuxBurninTools } from "../burnin-tools.ts";
import { hostname } from "node:os";
import type { CollectorData, Disk, Inventory } from "../../../shared/inventory.ts";
import { exec } from "../../../shared/system/exec.ts";
import type { HardwareBackend } from "../backend.ts";
import { LinuxMd } from "../../disk/raid/linux-md.ts";
import type { MdSystem } from "../../disk/raid/md-system.ts";
import { readBmcAddress } from "./bmc.ts";
import { readCpu } from "./cpu.ts";
import { LinuxDiskTools } from "./disk-tools.ts";
import { readDisks } from "./disks.ts";
import { readInterfaces } from "./interfaces.ts";
import { collectLldp, DEFAULT_LLDP_TIMEOUT_S, type FrameCapture } from "./lldp.ts";
import { readMemory } from "./memory.ts";
import { type EthtoolRunner, readNicFirmware } from "./nic-firmware.ts";
import { readNumaTopology } from "./numa.ts";
import { readPciDevices } from "./pci.ts";
import { readBootInfo, readSystemVendor } from "./system.ts";
import { readAttr } from "./sysfs.ts";

export interface LinuxBackendOptions {
  /** The BOOTIF kernel parameter, read by main from /proc/cmdline. */
  pxeInterface?: string | null;
  /** Seconds to listen for LLDP on each NIC (anvil.lldp_timeout); null turns the collector off. */
  lldpTimeoutS?: number | null;
  /** Where LLDP frames come from (tests); tcpdump by default. */
  lldpCapture?: FrameCapture;
  /** How `ethtool -i` runs (tests); the real ethtool by default. */
  ethtool?: EthtoolRunner;
  /** Roots of the pseudo filesystems (tests point them at fixtures). */
  roots?: { proc: string; sys: string; dev: string };
}

/** Reads the real machine from procfs and sysfs; external tools only where sysfs has no answer. */
export class LinuxBackend implements HardwareBackend {
  readonly name = "linux";
  readonly diskTools: LinuxDiskTools;
  readonly burnin = new LinuxBurninTools();
  private readonly roots: { proc: string; sys: string; dev: string };
  readonly md: MdSystem;
  private bmc: Promise<string | null> | undefined;

  constructor(private readonly options: LinuxBackendOptions = {}) {
    this.roots = options.roots ?? { proc: "/proc", sys: "/sys", dev: "/dev" };
    this.diskTools = new LinuxDiskTools(this.roots.sys);
    this.md = new LinuxMd(this.roots.sys);
  }

  async inventory(): Promise<Inventory> {
    const { proc, sys, dev } = this.roots;
    const [cpu, memory, disks, interfaces, system_vendor, boot, bmc_address] = await Promise.all([
      readCpu({ proc, sys }),
      readMemory({ proc, sys }),
      readDisks({ sys, dev }),
      readInterfaces(sys),
      readSystemVendor(sys),
      readBootInfo(sys, this.options.pxeInterface ?? null),
      this.bmcAddress(),
    ]);
    return {
      interfaces,
      cpu,
      disks,
      memory,
      bmc_address,
      bmc_v6address: null,
      system_vendor,
      boot,
      hostname: hostname(),
    };
  }

  async collectorData(options: { signal?: AbortSignal } = {}): Promise<CollectorData> {
    const { sys } = this.roots;
    const interfaces = await readInterfaces(sys);
    const nics = interfaces.map((nic) => nic.name);
    const timeoutS =
      this.options.lldpTimeoutS === undefined ? DEFAULT_LLDP_TIMEOUT_S : this.options.lldpTimeoutS;
    const [lldp_raw, pci_devices, numa_topology, nic_firmware] = await Promise.all([
      timeoutS === null
        ? undefined
        : collectLldp(nics, { timeoutS, capture: this.options.lldpCapture, signal: options.signal }),
      readPciDevices(sys),
      readNumaTopology(sys, nics),
      readNicFirmware(sys, interfaces, this.options.ethtool),
    ]);
    return { ...(lldp_raw === undefined ? {} : { lldp_raw }), pci_devices, numa_topology, nic_firmware };
  }

  disks(): Promise<Disk[]> {
    return readDisks(this.roots);
  }

  async macs(): Promise<string[]> {
    return (await readInterfaces(this.roots.sys)).map((item) => item.mac_address);
  }

  /** Memoised: the address does not change while the ramdisk runs, and ipmitool is slow. */
  bmcAddress(): Promise<string | null> {
    this.bmc ??= readBmcAddress(this.roots.dev);
    return this.bmc;
  }

  async bootId(): Promise<string> {
    const id = await readAttr(`${this.roots.proc}/sys/kernel/random/boot_id`);
    if (id === null || id === "") throw new Error("cannot read the boot id");
    return id;
  }

  async sync(): Promise<void> {
    await exec("sync", [], { timeoutMs: 120_000 });
  }

  async reboot(): Promise<void> {
    await this.sysrq("b");
  }

  async powerOff(): Promise<void> {
    await this.sysrq("o");
  }

  /** Through sysrq rather than /sbin/reboot: a ramdisk may have no init to hand the request to. */
  private async sysrq(key: "b" | "o"): Promise<void> {
    await this.sync();
    await writeFile(`${this.roots.proc}/sysrq-trigger`, key);
  }
}
