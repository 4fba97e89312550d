import type { BootInfo, SystemVendor } from "../../../shared/inventory.ts";
import { listDir, readAttr } from "./sysfs.ts";

/** DMI identity from /sys/class/dmi/id (what dmidecode and lshw read, without needing either). */
export async function readSystemVendor(sys: string): Promise<SystemVendor> {
  const dmi = (name: string): Promise<string> => readAttr(`${sys}/class/dmi/id/${name}`).then((v) => v ?? "");
  const [product_name, serial_number, manufacturer, vendor, version, build_date] = await Promise.all([
    dmi("product_name"),
    dmi("product_serial"),
    dmi("sys_vendor"),
    dmi("bios_vendor"),
    dmi("bios_version"),
    dmi("bios_date"),
  ]);
  return { product_name, serial_number, manufacturer, firmware: { vendor, version, build_date } };
}

/** UEFI when the kernel exposes /sys/firmware/efi (as IPA decides). */
export async function readBootInfo(sys: string, pxeInterface: string | null): Promise<BootInfo> {
  const efi = (await listDir(`${sys}/firmware`)).includes("efi");
  return { current_boot_mode: efi ? "uefi" : "bios", pxe_interface: pxeInterface };
}
