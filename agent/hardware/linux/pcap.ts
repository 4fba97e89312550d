import { LLDP_ETHERTYPE } from "../../../shared/lldp.ts";

const LINKTYPE_ETHERNET = 1;
const GLOBAL_HEADER = 24;
const RECORD_HEADER = 16;
const ETHERNET_HEADER = 14;
const VLAN_TPID = 0x8100;

/** The byte order a pcap file's magic number announces (µs or ns timestamps), or null for another file. */
function byteOrder(file: Uint8Array): "le" | "be" | null {
  if (file.length < GLOBAL_HEADER) return null;
  const magic = Buffer.from(file.subarray(0, 4)).toString("hex");
  if (magic === "d4c3b2a1" || magic === "4d3cb2a1") return "le";
  if (magic === "a1b2c3d4" || magic === "a1b23c4d") return "be";
  return null;
}

/**
 * The LLDPDU (the bytes after the Ethernet header) of the first LLDP frame in a libpcap capture, as tcpdump
 * writes it; null when the file holds none, is not Ethernet, or is cut short (a capture killed at its
 * deadline may end mid-record). Reads bytes from the wire, so never throws.
 */
export function firstLldpPdu(file: Uint8Array): Uint8Array | null {
  const order = byteOrder(file);
  if (order === null) return null;
  const view = Buffer.from(file.buffer, file.byteOffset, file.byteLength);
  const u32 = (offset: number): number =>
    order === "le" ? view.readUInt32LE(offset) : view.readUInt32BE(offset);
  if (u32(20) !== LINKTYPE_ETHERNET) return null;
  let offset = GLOBAL_HEADER;
  while (file.length - offset >= RECORD_HEADER) {
    const captured = u32(offset + 8);
    const start = offset + RECORD_HEADER;
    if (captured > file.length - start) return null;
    const frame = file.subarray(start, start + captured);
    offset = start + captured;
    if (frame.length < ETHERNET_HEADER) continue;
    let type = (frame[12]! << 8) | frame[13]!;
    let header = ETHERNET_HEADER;
    if (type === VLAN_TPID && frame.length >= ETHERNET_HEADER + 4) {
      type = (frame[16]! << 8) | frame[17]!;
      header += 4;
    }
    if (type === LLDP_ETHERTYPE) return frame.subarray(header);
  }
  return null;
}
