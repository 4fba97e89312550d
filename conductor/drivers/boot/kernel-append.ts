import { InvalidDriverInfo } from "../errors.ts";
import type { DriverNode } from "../interfaces.ts";
import { checkKernelWords } from "./kernel-args.ts";

/** Ironic's per-node driver_info key for the deploy ramdisk's kernel command line. */
export const KERNEL_APPEND_PARAMS = "kernel_append_params";
/**
 * The conductor's own ramdisk words (Ironic's `[pxe] kernel_append_params`): both consoles, the serial port
 * last, since the last console= is /dev/console and a BMC's serial-over-LAN is where operators watch.
 */
export const DEFAULT_KERNEL_WORDS: readonly string[] = ["console=tty0", "console=ttyS0,115200n8"];
/** Instead of those for nodes of these cpu_arch: Arm servers' (and QEMU virt's) serial port is a PL011. */
export const KERNEL_WORDS_BY_ARCH: Readonly<Record<string, readonly string[]>> = {
  aarch64: ["console=tty0", "console=ttyAMA0,115200"],
};
/** Where a node's value puts the conductor's own words (Ironic's placeholder). */
const DEFAULT_PLACEHOLDER = "%default%";
/** Words that are the conductor's to write: the agent's endpoints and certificate pin. */
const RESERVED = ["anvil.conductor", "anvil.ca_fingerprint"];

/**
 * The ramdisk's kernel words for a node, as Ironic's `driver_info.kernel_append_params`: absent, the
 * conductor's defaults (its `[pxe] kernel_append_params`, here the console words of the node's cpu_arch);
 * present, the node's words instead, each `%default%` standing for the defaults. An operator sets the agent's
 * options there, e.g. `anvil.lldp_timeout=10` (or IPA's `ipa-lldp-timeout=10`).
 * @throws InvalidDriverInfo for a value that is not a string, a word that could break out of the command line,
 *   or one that sets the agent's conductor or pin (the conductor writes those).
 */
export function ramdiskKernelWords(
  node: Pick<DriverNode, "driver_info">,
  defaults: readonly string[],
): string[] {
  const value = node.driver_info[KERNEL_APPEND_PARAMS];
  if (value === undefined || value === null) return [...defaults];
  if (typeof value !== "string" || value.length > 2048) {
    throw new InvalidDriverInfo(
      `driver_info.${KERNEL_APPEND_PARAMS} must be a string of at most 2048 characters`,
    );
  }
  const words = value.split(/\s+/).filter((word) => word !== "");
  const expanded = words.flatMap((word) => (word === DEFAULT_PLACEHOLDER ? defaults : [word]));
  for (const word of expanded) {
    const key = word.split("=", 1)[0]!;
    if (RESERVED.includes(key)) {
      throw new InvalidDriverInfo(
        `driver_info.${KERNEL_APPEND_PARAMS} may not set ${key}: the conductor writes it`,
      );
    }
  }
  try {
    return checkKernelWords(expanded);
  } catch (error) {
    throw new InvalidDriverInfo(`driver_info.${KERNEL_APPEND_PARAMS}: ${(error as Error).message}`);
  }
}
