import type { Disk } from "../../../shared/inventory.ts";
import { blankDisk } from "../../../shared/inventory.ts";
import { basename, linkTarget, listDir, readAttr, readInt, readNonEmpty } from "./sysfs.ts";

/** Block devices that are never install targets: RAM disks, compressed swap, optical and floppy drives. */
const SKIPPED = /^(ram|zram|sr|fd|dm-|nbd)\d*/;

/**
 * Lists disks from sysfs alone (no udev, no lsblk needed): whole devices, not partitions.
 * Loop devices appear only while they have a backing file (so an idle /dev/loopN is not a "disk").
 */
export async function readDisks(root: { sys: string; dev: string }): Promise<Disk[]> {
  const names = (await listDir(`${root.sys}/block`)).filter((name) => !SKIPPED.test(name)).sort();
  const byPath = await byPathLinks(root.dev);
  const disks = await Promise.all(names.map((name) => readDisk(root.sys, { name, byPath })));
  return disks.filter((disk): disk is Disk => disk !== null);
}

async function readDisk(
  sys: string,
  options: { name: string; byPath: Map<string, string> },
): Promise<Disk | null> {
  const { name } = options;
  const dir = `${sys}/block/${name}`;
  if (name.startsWith("loop") && (await readNonEmpty(`${dir}/loop/backing_file`)) === null) return null;
  const sectors = await readInt(`${dir}/size`);
  if (sectors === null || sectors === 0) return null;
  const [model, vendor, serial, wwid, rotational, logical, physical, deviceLink, pathLink] =
    await Promise.all([
      readNonEmpty(`${dir}/device/model`),
      readNonEmpty(`${dir}/device/vendor`),
      firstOf([`${dir}/serial`, `${dir}/device/serial`, `${dir}/device/vpd_pg80`]),
      firstOf([`${dir}/wwid`, `${dir}/device/wwid`]),
      readAttr(`${dir}/queue/rotational`),
      readInt(`${dir}/queue/logical_block_size`),
      readInt(`${dir}/queue/physical_block_size`),
      linkTarget(`${dir}/device`),
      linkTarget(`${sys}/block/${name}`),
    ]);
  const hctl =
    deviceLink !== null && /^\d+:\d+:\d+:\d+$/.test(basename(deviceLink)) ? basename(deviceLink) : null;
  const wwn = normaliseWwn(wwid);
  return {
    ...blankDisk(`/dev/${name}`, sectors * 512),
    model: model ?? "",
    vendor,
    serial: serial === null ? null : printable(serial),
    wwn: wwn.wwn,
    wwn_with_extension: wwn.withExtension,
    wwn_vendor_extension: wwn.vendorExtension,
    rotational: rotational === "1",
    hctl,
    by_path: options.byPath.get(name) ?? null,
    logical_sectors: logical,
    physical_sectors: physical,
    tran: transport(name, pathLink ?? ""),
  };
}

async function firstOf(paths: string[]): Promise<string | null> {
  for (const path of paths) {
    const value = await readNonEmpty(path);
    if (value !== null) return value;
  }
  return null;
}

/** VPD page 80 and some sysfs serials carry binary padding; keep the printable part. */
function printable(value: string): string {
  return value.replace(/[^\x20-\x7e]/g, "").trim();
}

/**
 * sysfs wwid looks like "naa.5000c500a1b2c3d4", "eui.0025388…" or "nvme.1b36-…"; IPA reports the NAA
 * as "0x5000c500a1b2c3d4" and splits a 32-digit NAA into the WWN and its vendor extension.
 */
function normaliseWwn(wwid: string | null): {
  wwn: string | null;
  withExtension: string | null;
  vendorExtension: string | null;
} {
  if (wwid === null) return { wwn: null, withExtension: null, vendorExtension: null };
  const naa = /^naa\.([0-9a-f]+)$/i.exec(wwid)?.[1]?.toLowerCase();
  if (naa === undefined) return { wwn: wwid, withExtension: wwid, vendorExtension: null };
  if (naa.length === 32) {
    const wwn = `0x${naa.slice(0, 16)}`;
    const extension = `0x${naa.slice(16)}`;
    return { wwn, withExtension: `${wwn}${naa.slice(16)}`, vendorExtension: extension };
  }
  return { wwn: `0x${naa}`, withExtension: `0x${naa}`, vendorExtension: null };
}

/** The transport as lsblk's TRAN would name it, inferred from the sysfs device path. */
function transport(name: string, devicePath: string): string | null {
  if (name.startsWith("nvme")) return "nvme";
  if (devicePath.includes("/usb")) return "usb";
  if (/\/ata\d+\//.test(devicePath)) return "sata";
  if (devicePath.includes("/virtio")) return "virtio";
  if (/\/(sas|end_device|expander)-/.test(devicePath)) return "sas";
  return null;
}

/** /dev/disk/by-path exists only with udev; without it by_path stays null. */
async function byPathLinks(dev: string): Promise<Map<string, string>> {
  const dir = `${dev}/disk/by-path`;
  const links = await listDir(dir);
  const map = new Map<string, string>();
  await Promise.all(
    links.map(async (link) => {
      const target = await linkTarget(`${dir}/${link}`);
      if (target !== null && !map.has(basename(target))) map.set(basename(target), `${dir}/${link}`);
    }),
  );
  return map;
}
