// Names for a bench's simulated machines: the i-th MAC and node uuid of a fleet, distinct per bench by prefix.

/** The i-th MAC under a 3-byte prefix (52:54:00 is QEMU's; benches running side by side pick others). */
export function fleetMac(index: number, prefix = "52:54:00"): string {
  const hex = (index + 1).toString(16).padStart(6, "0");
  return `${prefix}:${hex.slice(0, 2)}:${hex.slice(2, 4)}:${hex.slice(4, 6)}`;
}

/** The i-th node uuid (a version 4 shape); `variant` keeps two benches' fleets apart. */
export function fleetUuid(index: number, variant: "8" | "9" = "8"): string {
  return `00000000-0000-4000-${variant}000-${(index + 1).toString(16).padStart(12, "0")}`;
}
