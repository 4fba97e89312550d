import { readdir, readFile } from "node:fs/promises";
import type { MachineLink } from "./plan.ts";

const ARPHRD_ETHER = "1";
const ZERO_MAC = "00:00:00:00:00:00";

async function read(path: string): Promise<string | null> {
  return readFile(path, "utf8").then(
    (text) => text.trim(),
    () => null,
  );
}

/**
 * This machine's ethernet links by MAC from `<sys>/class/net`: bonds, VLANs and bridges left out (they
 * carry another link's MAC), a bond member by its permanent MAC (the bond rewrites the current one).
 */
export async function readMachineLinks(sys: string): Promise<MachineLink[]> {
  const names = await readdir(`${sys}/class/net`).catch(() => []);
  const links = await Promise.all(
    names.sort().map(async (name): Promise<MachineLink | null> => {
      const dir = `${sys}/class/net/${name}`;
      const [type, address, permanent, uevent] = await Promise.all([
        read(`${dir}/type`),
        read(`${dir}/address`),
        read(`${dir}/bonding_slave/perm_hwaddr`),
        read(`${dir}/uevent`),
      ]);
      if (type !== ARPHRD_ETHER || /^DEVTYPE=(vlan|bond|bridge)$/m.test(uevent ?? "")) return null;
      const mac = (permanent ?? address ?? "").toLowerCase();
      return mac === "" || mac === ZERO_MAC ? null : { name, mac };
    }),
  );
  return links.filter((link) => link !== null);
}
