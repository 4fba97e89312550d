import { networkInterfaces } from "node:os";
import type { Interface } from "../../../shared/inventory.ts";
import { realpath } from "node:fs/promises";
import { basename, linkTarget, listDir, readAttr, readInt, readNonEmpty } from "./sysfs.ts";

const ARPHRD_ETHER = "1";
const ZERO_MAC = "00:00:00:00:00:00";

/** Ethernet interfaces from /sys/class/net (loopback and MAC-less devices left out). */
export async function readInterfaces(sys: string): Promise<Interface[]> {
  const addresses = networkInterfaces();
  const names = (await listDir(`${sys}/class/net`)).filter((name) => name !== "lo").sort();
  const found = await Promise.all(
    names.map(async (name): Promise<{ nic: Interface; physical: boolean } | null> => {
      const dir = `${sys}/class/net/${name}`;
      const [type, mac, carrier, speed, driverLink, deviceLink, vendor, product] = await Promise.all([
        readAttr(`${dir}/type`),
        readNonEmpty(`${dir}/address`),
        readAttr(`${dir}/carrier`),
        readInt(`${dir}/speed`),
        linkTarget(`${dir}/device/driver`),
        linkTarget(`${dir}/device`),
        readNonEmpty(`${dir}/device/vendor`),
        readNonEmpty(`${dir}/device/device`),
      ]);
      if (type !== ARPHRD_ETHER || mac === null || mac === ZERO_MAC) return null;
      const assigned = addresses[name] ?? [];
      const v4 = assigned.find((address) => address.family === "IPv4");
      const v6 = assigned.find((address) => address.family === "IPv6");
      const pciAddress = await pciAddressOf(`${dir}/device`);
      const nic: Interface = {
        name,
        mac_address: mac.toLowerCase(),
        ipv4_address: v4?.address ?? null,
        ipv6_address: v6 === undefined ? null : `${v6.address}%${name}`,
        has_carrier: carrier === "1",
        lldp: null,
        vendor,
        product,
        client_id: null,
        biosdevname: null,
        speed_mbps: speed !== null && speed > 0 ? speed : null,
        pci_address: pciAddress,
        driver: driverLink === null ? null : basename(driverLink),
      };
      return { nic, physical: deviceLink !== null };
    }),
  );
  const ethernet = found.filter((item) => item !== null);
  // Like IPA: only interfaces backed by a device (bridges, bonds, ifb, veth have none), unless there are
  // no others, as in a container or network namespace, where the virtual ones are all there is.
  const physical = ethernet.filter((item) => item.physical);
  return (physical.length > 0 ? physical : ethernet).map((item) => item.nic);
}

/** The nearest PCI function in the device's sysfs path (a virtio NIC sits one level below its PCI device). */
async function pciAddressOf(devicePath: string): Promise<string | null> {
  try {
    const segments = (await realpath(devicePath)).split("/");
    const pci = segments.filter((segment) => /^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$/.test(segment));
    return pci.at(-1) ?? null;
  } catch {
    return null;
  }
}
