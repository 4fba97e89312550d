import type { PciDevice } from "../../../shared/inventory.ts";
import { listDir, readNonEmpty } from "./sysfs.ts";

/**
 * What a PCI class code names, for the devices operators schedule on (GPUs and accelerators): the base class
 * and subclass (the top 16 bits of the 24-bit code). A short table instead of pci.ids (1.3 MB): Ironic's
 * accelerators hook names models by vendor/device id itself.
 */
const NAMED_CLASSES: Readonly<Record<string, string>> = {
  "0300": "GPU", // display controller, VGA compatible
  "0302": "GPU", // 3D controller (compute GPUs: NVIDIA Tesla/A100, AMD Instinct)
  "0380": "GPU", // other display controller
  "0b40": "accelerator", // co-processor
  "1200": "accelerator", // processing accelerator (Intel QAT/DSA, Habana, TPU-like cards)
  "1201": "accelerator", // AI inference accelerator
  "1080": "accelerator", // other encryption controller (crypto offload)
};

/** "0x10de" → "10de", as IPA strips the prefix; null for anything else. */
function hexId(value: string | null): string | null {
  const match = value === null ? null : /^0x([0-9a-fA-F]+)$/.exec(value);
  return match === null ? null : match[1]!.toLowerCase();
}

/** The name NAMED_CLASSES gives a 24-bit class code ("030000"), or null. */
export function pciClassType(pciClass: string): string | null {
  return NAMED_CLASSES[pciClass.slice(0, 4).padStart(4, "0")] ?? null;
}

/**
 * IPA's pci-devices collector from /sys/bus/pci/devices: vendor, product, class, revision, NUMA node, plus
 * the class's name for GPUs and accelerators. A device whose ids cannot be read is left out, as in IPA.
 */
export async function readPciDevices(sys: string): Promise<PciDevice[]> {
  const root = `${sys}/bus/pci/devices`;
  const names = (await listDir(root)).sort();
  const devices = await Promise.all(
    names.map(async (bus): Promise<PciDevice | null> => {
      const dir = `${root}/${bus}`;
      const [vendor, device, pciClass, revision, numa] = await Promise.all(
        ["vendor", "device", "class", "revision", "numa_node"].map((attr) => readNonEmpty(`${dir}/${attr}`)),
      );
      const vendor_id = hexId(vendor ?? null);
      const product_id = hexId(device ?? null);
      const classCode = hexId(pciClass ?? null);
      if (vendor_id === null || product_id === null || classCode === null) return null;
      const padded = classCode.padStart(6, "0");
      return {
        vendor_id,
        product_id,
        class: padded,
        revision: hexId(revision ?? null),
        bus,
        numa_node_id: numa ?? null,
        type: pciClassType(padded),
      };
    }),
  );
  return devices.filter((device) => device !== null);
}
