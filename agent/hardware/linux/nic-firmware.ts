import type { Interface, NicFirmware } from "../../../shared/inventory.ts";
import { exec } from "../../../shared/system/exec.ts";
import { readNonEmpty } from "./sysfs.ts";

/** `ethtool -i` fields are at most 32 bytes (ETHTOOL_*_LEN); anything longer is not ethtool's answer. */
const MAX_FIELD = 64;
const ETHTOOL_TIMEOUT_MS = 10_000;

/** The fields of `ethtool -i` this collector keeps, by ethtool's labels. */
export interface EthtoolDriverInfo {
  driver: string | null;
  driver_version: string | null;
  firmware_version: string | null;
  expansion_rom_version: string | null;
  bus_info: string | null;
}

const LABELS: Readonly<Record<string, keyof EthtoolDriverInfo>> = {
  driver: "driver",
  version: "driver_version",
  "firmware-version": "firmware_version",
  "expansion-rom-version": "expansion_rom_version",
  "bus-info": "bus_info",
};

/**
 * Reads `ethtool -i IFACE` ("label: value" lines); an empty or missing field is null, as is one that is too
 * long or holds control characters. Null when the output has no driver line (not ethtool's answer). Never throws.
 */
export function parseEthtoolDriverInfo(output: string): EthtoolDriverInfo | null {
  const info: EthtoolDriverInfo = {
    driver: null,
    driver_version: null,
    firmware_version: null,
    expansion_rom_version: null,
    bus_info: null,
  };
  let sawDriver = false;
  for (const line of output.slice(0, 16_384).split("\n", 64)) {
    const colon = line.indexOf(":");
    if (colon < 0) continue;
    const field = LABELS[line.slice(0, colon)];
    if (field === undefined || !Object.hasOwn(LABELS, line.slice(0, colon))) continue;
    if (field === "driver") sawDriver = true;
    const value = line.slice(colon + 1).trim();
    info[field] = value === "" || value.length > MAX_FIELD || /\p{Cc}/u.test(value) ? null : value;
  }
  return sawDriver ? info : null;
}

/** How to run ethtool: the real one, or a test's. Resolves with null output when it cannot answer. */
export type EthtoolRunner = (iface: string) => Promise<string | null>;

/** @throws the spawn error (ENOENT) when there is no ethtool, so the caller can fall back to sysfs */
export const runEthtool: EthtoolRunner = async (iface) => {
  const run = await exec("ethtool", ["-i", iface], { timeoutMs: ETHTOOL_TIMEOUT_MS });
  return run.code === 0 ? run.stdout : null;
};

/** What sysfs has without ethtool: the driver, its module's version where it declares one, the PCI address. */
async function fromSysfs(sys: string, nic: Interface): Promise<EthtoolDriverInfo> {
  const version = nic.driver === null ? null : await readNonEmpty(`${sys}/module/${nic.driver}/version`);
  return {
    driver: nic.driver,
    driver_version: version,
    firmware_version: null,
    expansion_rom_version: null,
    bus_info: nic.pci_address,
  };
}

/**
 * plugin_data `nic_firmware`: each NIC's driver, driver version, firmware version and bus address from
 * `ethtool -i`, or from sysfs when the machine has no ethtool (then without firmware versions). A NIC
 * ethtool cannot answer for (no driver info) gets sysfs's answer too.
 */
export async function readNicFirmware(
  sys: string,
  nics: readonly Interface[],
  ethtool: EthtoolRunner = runEthtool,
): Promise<NicFirmware[]> {
  let haveEthtool = true;
  const results: NicFirmware[] = [];
  // one at a time: a handful of NICs, and the first ENOENT spares the others a spawn
  for (const nic of nics) {
    let info: EthtoolDriverInfo | null = null;
    if (haveEthtool) {
      try {
        const output = await ethtool(nic.name);
        info = output === null ? null : parseEthtoolDriverInfo(output);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") haveEthtool = false;
      }
    }
    const source = info === null ? "sysfs" : "ethtool";
    info ??= await fromSysfs(sys, nic);
    results.push({ name: nic.name, mac_address: nic.mac_address, ...info, source });
  }
  return results;
}
