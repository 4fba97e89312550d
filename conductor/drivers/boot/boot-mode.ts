import type { DriverNode } from "../interfaces.ts";

export type BootMode = "bios" | "uefi";

/**
 * The node's boot mode from properties.capabilities, which Ironic stores either as the string
 * "boot_mode:uefi,secure_boot:false" or as an object; when they say nothing, the node's recorded `boot_mode`
 * (PUT …/states/boot_mode). BIOS unless one says uefi.
 */
export function bootModeOf(node: Pick<DriverNode, "properties" | "boot_mode">): BootMode {
  const capabilities = node.properties.capabilities;
  let mode: unknown;
  if (typeof capabilities === "string") {
    for (const pair of capabilities.split(",")) {
      const [key, value] = pair.split(":", 2);
      if (key?.trim() === "boot_mode") mode = value?.trim();
    }
  } else if (typeof capabilities === "object" && capabilities !== null) {
    mode = (capabilities as Record<string, unknown>).boot_mode;
  }
  if (mode === undefined) mode = node.boot_mode;
  return mode === "uefi" ? "uefi" : "bios";
}
