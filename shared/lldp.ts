import { z } from "zod";

/**
 * LLDP (IEEE 802.1AB) as ironic-python-agent reports it and Ironic's inspection hooks read it: each NIC's
 * frame as a list of raw TLVs `[type, "hex"]` (plugin_data `lldp_raw`), parsed into Ironic's `parsed_lldp`
 * names and into a port's `local_link_connection`. Every function here reads bytes a switch (or anyone on
 * the wire) chose: none throws; a malformed TLV is skipped, as Ironic's hooks skip it.
 */

export const LLDP_ETHERTYPE = 0x88cc;
/** Largest TLV value: the 9-bit length field. */
export const LLDP_TLV_VALUE_MAX_LEN = 511;

const TLV = {
  END: 0,
  CHASSIS_ID: 1,
  PORT_ID: 2,
  PORT_DESCRIPTION: 4,
  SYSTEM_NAME: 5,
  SYSTEM_DESCRIPTION: 6,
  MGMT_ADDRESS: 8,
  ORG_SPECIFIC: 127,
} as const;
const OUI_8021 = "0080c2";
const OUI_8023 = "00120f";

/** One raw TLV in IPA's wire shape: its 7-bit type and its value as lower- or upper-case hex. */
export const RawTlvSchema = z.tuple([
  z.number().int().min(0).max(127),
  z
    .string()
    .max(LLDP_TLV_VALUE_MAX_LEN * 2)
    .regex(/^(?:[0-9a-fA-F]{2})*$/),
]);
export type RawTlv = z.infer<typeof RawTlvSchema>;

/** plugin_data `lldp_raw`: interface name → the TLVs of the one frame heard on it (empty when none came). */
export const LldpRawSchema = z.record(z.string().max(64), z.array(RawTlvSchema).max(512));
export type LldpRaw = z.infer<typeof LldpRawSchema>;

/**
 * Splits an LLDPDU (the frame after its 14-byte Ethernet header) into TLVs, as IPA's `_parse_tlv` does, but
 * stops after the End TLV: what follows it is Ethernet padding, not TLVs. A TLV whose length runs past the
 * buffer keeps the bytes there are (IPA's slice does the same). Never throws.
 */
export function splitTlvs(pdu: Uint8Array): RawTlv[] {
  const tlvs: RawTlv[] = [];
  let offset = 0;
  while (pdu.length - offset >= 2) {
    const header = (pdu[offset]! << 8) | pdu[offset + 1]!;
    const type = header >> 9;
    const length = header & 0x1ff;
    const value = pdu.subarray(offset + 2, Math.min(pdu.length, offset + 2 + length));
    tlvs.push([type, Buffer.from(value).toString("hex")]);
    offset += 2 + length;
    if (type === TLV.END) break;
  }
  return tlvs;
}

/** Ironic's parse_lldp hook's names (plugin_data `parsed_lldp[iface]`), for the TLVs Anvil reads. */
export interface ParsedLldp {
  switch_chassis_id?: string;
  switch_port_id?: string;
  switch_port_description?: string;
  switch_system_name?: string;
  switch_system_description?: string;
  switch_mgmt_addresses?: string[];
  switch_port_untagged_vlan_id?: number;
  switch_port_vlans?: { id: number; name: string }[];
  switch_port_mtu?: number;
}

/** Ironic's local_link_connection keys an LLDP frame can fill. */
export interface LldpLocalLink {
  switch_id?: string;
  port_id?: string;
  switch_info?: string;
}

function hexBytes(hex: string): Uint8Array | null {
  if (!/^(?:[0-9a-fA-F]{2})*$/.test(hex)) return null;
  return Uint8Array.from(Buffer.from(hex, "hex"));
}

/** UTF-8 as Python's strict decode: null (skip the TLV) on invalid bytes, as Ironic's hooks do. */
function utf8(bytes: Uint8Array): string | null {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return null;
  }
}

/** netaddr's mac_unix_expanded: "aa:bb:cc:dd:ee:ff". */
function mac(bytes: Uint8Array): string | null {
  if (bytes.length !== 6) return null;
  return [...bytes].map((b) => b.toString(16).padStart(2, "0")).join(":");
}

function ipv6(bytes: Uint8Array): string {
  const words: string[] = [];
  for (let i = 0; i < 16; i += 2) words.push(((bytes[i]! << 8) | bytes[i + 1]!).toString(16));
  // the longest run of zero words (two or more) becomes "::", as netaddr prints it
  let best = { start: -1, length: 0 };
  for (let i = 0; i < 8;) {
    let j = i;
    while (j < 8 && words[j] === "0") j++;
    if (j - i > best.length && j - i > 1) best = { start: i, length: j - i };
    i = j === i ? i + 1 : j;
  }
  if (best.start < 0) return words.join(":");
  const head = words.slice(0, best.start).join(":");
  const tail = words.slice(best.start + best.length).join(":");
  return `${head}::${tail}`;
}

/** An IANA address family byte and its address (IPv4, IPv6, MAC), or null for another family or length. */
function ianaAddress(family: number, bytes: Uint8Array): string | null {
  if (family === 1 && bytes.length === 4) return [...bytes].join(".");
  if (family === 2 && bytes.length === 16) return ipv6(bytes);
  if (family === 6) return mac(bytes);
  return null;
}

/**
 * A Chassis ID or Port ID TLV's value as Ironic's construct definitions decode it: MAC subtypes formatted,
 * network-address subtypes as IP text, the named subtypes as UTF-8. Null for an unknown subtype.
 */
function idValue(data: Uint8Array, subtypes: IdSubtypes): string | null {
  if (data.length < 1) return null;
  const subtype = data[0]!;
  const rest = data.subarray(1);
  if (subtype === subtypes.mac) return mac(rest);
  if (subtype === subtypes.address) return rest.length < 1 ? null : ianaAddress(rest[0]!, rest.subarray(1));
  return subtypes.texts.includes(subtype) ? utf8(rest) : null;
}

interface IdSubtypes {
  mac: number;
  address: number;
  texts: readonly number[];
}
const CHASSIS_SUBTYPES: IdSubtypes = { mac: 4, address: 5, texts: [1, 2, 3, 6, 7] };
const PORT_SUBTYPES: IdSubtypes = { mac: 3, address: 4, texts: [1, 2, 5, 7] };
function chassisId(data: Uint8Array): { value: string | null; isMac: boolean } {
  return { value: idValue(data, CHASSIS_SUBTYPES), isMac: data[0] === CHASSIS_SUBTYPES.mac };
}
function portId(data: Uint8Array): string | null {
  return idValue(data, PORT_SUBTYPES);
}

/** Management Address TLV: string length, family, address (the interface fields after it are not read). */
function mgmtAddress(data: Uint8Array): string | null {
  if (data.length < 2) return null;
  const length = data[0]!;
  if (length < 1 || data.length < 1 + length) return null;
  return ianaAddress(data[1]!, data.subarray(2, 1 + length));
}

function parseOrgSpecific(data: Uint8Array, parsed: ParsedLldp): void {
  if (data.length < 4) return;
  const oui = Buffer.from(data.subarray(0, 3)).toString("hex");
  const subtype = data[3]!;
  const body = data.subarray(4);
  if (oui === OUI_8021 && subtype === 1 && body.length >= 2) {
    parsed.switch_port_untagged_vlan_id = (body[0]! << 8) | body[1]!;
  } else if (oui === OUI_8021 && subtype === 3 && body.length >= 3) {
    const nameLength = body[2]!;
    if (body.length < 3 + nameLength) return;
    const name = utf8(body.subarray(3, 3 + nameLength));
    if (name === null) return;
    (parsed.switch_port_vlans ??= []).push({ id: (body[0]! << 8) | body[1]!, name });
  } else if (oui === OUI_8023 && subtype === 4 && body.length >= 2) {
    parsed.switch_port_mtu = (body[0]! << 8) | body[1]!;
  }
}

/** Decodes each TLV's hex, skipping any that are not hex (Ironic logs and skips them). */
function decoded(tlvs: readonly RawTlv[]): [number, Uint8Array][] {
  const out: [number, Uint8Array][] = [];
  for (const [type, hex] of tlvs) {
    const bytes = hexBytes(hex);
    if (bytes !== null) out.push([type, bytes]);
  }
  return out;
}

/**
 * Ironic's parse_lldp hook for the basic management, 802.1 (VLANs) and 802.3 (MTU) TLVs: the first of each
 * single-valued TLV wins, VLAN names and management addresses accumulate. Never throws.
 */
export function parseLldp(tlvs: readonly RawTlv[]): ParsedLldp {
  const parsed: ParsedLldp = {};
  for (const [type, data] of decoded(tlvs)) {
    switch (type) {
      case TLV.CHASSIS_ID: {
        const { value } = chassisId(data);
        if (value !== null) parsed.switch_chassis_id ??= value;
        break;
      }
      case TLV.PORT_ID: {
        const value = portId(data);
        if (value !== null) parsed.switch_port_id ??= value;
        break;
      }
      case TLV.PORT_DESCRIPTION:
      case TLV.SYSTEM_NAME:
      case TLV.SYSTEM_DESCRIPTION: {
        const text = utf8(data);
        if (text === null) break;
        if (type === TLV.PORT_DESCRIPTION) parsed.switch_port_description ??= text;
        else if (type === TLV.SYSTEM_NAME) parsed.switch_system_name ??= text;
        else parsed.switch_system_description ??= text;
        break;
      }
      case TLV.MGMT_ADDRESS: {
        const address = mgmtAddress(data);
        if (address !== null) (parsed.switch_mgmt_addresses ??= []).push(address);
        break;
      }
      case TLV.ORG_SPECIFIC:
        parseOrgSpecific(data, parsed);
        break;
      default:
        break;
    }
  }
  return parsed;
}

/**
 * Ironic's local_link_connection hook over one NIC's TLVs: switch_id from a MAC-subtype Chassis ID only,
 * port_id from the Port ID (any subtype Ironic decodes), switch_info from the System Name. Keys already in
 * `existing` (an operator's, or an earlier inspection's) are kept: only missing keys are returned.
 */
export function localLinkFromLldp(
  tlvs: readonly RawTlv[],
  existing: Readonly<Record<string, unknown>> = {},
): LldpLocalLink {
  const found: LldpLocalLink = {};
  for (const [type, data] of decoded(tlvs)) {
    if (type === TLV.PORT_ID) {
      const value = portId(data);
      if (value !== null) found.port_id = value;
    } else if (type === TLV.CHASSIS_ID) {
      const { value, isMac } = chassisId(data);
      if (value !== null && isMac) found.switch_id = value;
    } else if (type === TLV.SYSTEM_NAME) {
      const value = utf8(data);
      if (value !== null) found.switch_info = value;
    }
  }
  const missing: LldpLocalLink = {};
  for (const key of ["switch_id", "port_id", "switch_info"] as const) {
    const value = found[key];
    if (value !== undefined && !(key in existing)) missing[key] = value;
  }
  return missing;
}
