import type { Inventory } from "../../shared/inventory.ts";
import { GIB } from "../../shared/inventory.ts";
import { RootDeviceHintsSchema, selectRootDevice } from "../../shared/root-device.ts";

const MIB = 1024 * 1024;

/** Node properties derived from an inventory, as Ironic's inspection sets them. Pure. */
export function propertiesFromInventory(
  inventory: Inventory,
  current: Record<string, unknown>,
): Record<string, unknown> {
  const hints = RootDeviceHintsSchema.safeParse(current.root_device);
  const root = selectRootDevice(inventory.disks, hints.success ? hints.data : null);
  const capabilities = mergeCapabilities(current.capabilities, {
    boot_mode: inventory.boot.current_boot_mode,
  });
  return {
    ...current,
    cpus: inventory.cpu.count,
    memory_mb: inventory.memory.physical_mb ?? Math.round(inventory.memory.total / MIB),
    cpu_arch: inventory.cpu.architecture,
    // one GiB less than the disk, like ironic-inspector, so partitioning never runs out of room
    local_gb: root ? Math.max(0, Math.floor(root.size / GIB) - 1) : 0,
    capabilities,
  };
}

/** Ironic keeps capabilities as "k1:v1,k2:v2". */
function capabilityMap(existing: unknown): Map<string, string> {
  const map = new Map<string, string>();
  if (typeof existing === "string") {
    for (const pair of existing.split(",")) {
      const [key, ...rest] = pair.split(":");
      if (key) map.set(key.trim(), rest.join(":").trim());
    }
  }
  return map;
}

const capabilityString = (map: Map<string, string>): string =>
  [...map].map(([k, v]) => `${k}:${v}`).join(",");

export function mergeCapabilities(existing: unknown, updates: Record<string, string>): string {
  const map = capabilityMap(existing);
  for (const [key, value] of Object.entries(updates)) map.set(key, value);
  return capabilityString(map);
}

/** The capabilities without `name` (Ironic's remove_node_capability). */
export function removeCapability(existing: unknown, name: string): string {
  const map = capabilityMap(existing);
  map.delete(name);
  return capabilityString(map);
}

/** The MAC the node PXE-booted from, from BOOTIF ("01-52-54-00-..."), lower-case colon form. */
export function pxeMac(inventory: Inventory): string | null {
  const bootif = inventory.boot.pxe_interface;
  if (!bootif) return null;
  const hex = bootif.replace(/^01-/, "").replace(/-/g, ":").toLowerCase();
  return /^([0-9a-f]{2}:){5}[0-9a-f]{2}$/.test(hex) ? hex : null;
}
