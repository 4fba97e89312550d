import { InvalidDriverInfo } from "../errors.ts";

/** A MAC address in the one form Anvil stores and names files after: "52:54:00:ab:cd:ef". */
export type Mac = string & { readonly __mac: unique symbol };

// Colon or hyphen separated, six octets of two hex digits; nothing else (no dots, no padding, no spaces).
const MAC_PATTERN = /^[0-9a-f]{2}([:-])[0-9a-f]{2}(\1[0-9a-f]{2}){4}$/i;

export class InvalidMacAddress extends InvalidDriverInfo {
  constructor(input: unknown) {
    super(
      `invalid MAC address ${JSON.stringify(String(input)).slice(0, 40)}: expected six hex octets like 52:54:00:ab:cd:ef`,
    );
    this.name = "InvalidMacAddress";
  }
}

export function isMac(input: unknown): boolean {
  return typeof input === "string" && MAC_PATTERN.test(input);
}

/** Lower-case colon form. @throws InvalidMacAddress for anything that is not a MAC. */
export function normalizeMac(input: unknown): Mac {
  if (typeof input !== "string" || !MAC_PATTERN.test(input)) throw new InvalidMacAddress(input);
  return input.toLowerCase().replaceAll("-", ":") as Mac;
}

/** "52-54-00-ab-cd-ef", as iPXE's ${mac:hexhyp} spells it. */
export function macHyphenated(mac: Mac): string {
  return mac.replaceAll(":", "-");
}

/** "01-52-54-00-ab-cd-ef": ARP hardware type 1 (Ethernet) + MAC, as pxelinux, grub and BOOTIF use it. */
export function macPxeName(mac: Mac): string {
  return `01-${macHyphenated(mac)}`;
}
