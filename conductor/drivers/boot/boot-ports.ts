import { InvalidDriverInfo } from "../errors.ts";
import type { DriverNode } from "../interfaces.ts";
import { isMac, normalizeMac } from "./mac.ts";
import type { Mac } from "./mac.ts";

/** MACs of the ports the node network-boots from. @throws InvalidDriverInfo (none, or a malformed MAC). */
export function pxeMacs(node: DriverNode): Mac[] {
  const macs = node.ports.filter((port) => port.pxe_enabled).map((port) => normalizeMac(port.address));
  if (macs.length === 0) throw new InvalidDriverInfo(`node ${node.uuid} has no PXE-enabled port`);
  return [...new Set(macs)];
}

/** Every well-formed MAC of the node, PXE-enabled or not: clean-up removes files for all of them. */
export function allMacs(node: DriverNode): Mac[] {
  return [
    ...new Set(
      node.ports
        .map((port) => port.address)
        .filter(isMac)
        .map(normalizeMac),
    ),
  ];
}
