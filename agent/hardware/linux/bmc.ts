import { access } from "node:fs/promises";
import { exec } from "../../../shared/system/exec.ts";

/**
 * The BMC's IPv4 address through the in-band IPMI device: "0.0.0.0" when none is configured (as IPA),
 * null when there is no IPMI device or no ipmitool. Only tried when /dev/ipmi0 exists, so a machine
 * without a BMC pays nothing.
 */
export async function readBmcAddress(dev: string): Promise<string | null> {
  const device = await firstExisting([`${dev}/ipmi0`, `${dev}/ipmi/0`, `${dev}/ipmidev/0`]);
  if (device === null) return null;
  try {
    const result = await exec("ipmitool", ["lan", "print"], { timeoutMs: 10_000 });
    if (result.code !== 0) return null;
    return /^IP Address\s*:\s*(\S+)/m.exec(result.stdout)?.[1] ?? "0.0.0.0";
  } catch {
    return null; // no ipmitool in this image
  }
}

async function firstExisting(paths: string[]): Promise<string | null> {
  for (const path of paths) {
    try {
      await access(path);
      return path;
    } catch {
      // try the next spelling
    }
  }
  return null;
}
