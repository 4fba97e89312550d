// The IPMI message inside a LAN packet (IPMI v2.0 §13.8): two checksummed parts, requester and responder
// addresses, network function, sequence, command and data. Decoders return null and never throw.

/** The BMC's address on the IPMB (responder of every request we send). */
export const BMC_ADDRESS = 0x20;
/** A remote console's software ID (§5.5: 81h, the first remote console SWID). */
export const CONSOLE_ADDRESS = 0x81;

export const NetFn = { chassis: 0x00, app: 0x06 } as const;
export const Command = {
  getChassisStatus: 0x01,
  chassisControl: 0x02,
  getChannelAuthCapabilities: 0x38,
  setSessionPrivilegeLevel: 0x3b,
  closeSession: 0x3c,
} as const;

/** One IPMI message as it travels: `to`/`from` are the responder's and requester's addresses as sent. */
export interface LanMessage {
  /** First byte: rsAddr in a request, rqAddr in a response. */
  to: number;
  /** Network function (odd in a response: request's + 1). */
  netFn: number;
  /** Fourth byte: rqAddr in a request, rsAddr in a response. */
  from: number;
  /** rqSeq (6 bits): pairs a response with its request. */
  seq: number;
  cmd: number;
  /** In a response, the completion code is the first data byte. */
  data: Buffer;
}

/** Two's complement checksum: the bytes plus it sum to 0 modulo 256 (§13.8). */
export function checksum(bytes: Buffer): number {
  let sum = 0;
  for (const byte of bytes) sum = (sum + byte) & 0xff;
  return (0x100 - sum) & 0xff;
}

/** Encodes a message (LUNs 0). */
export function encodeLanMessage(message: LanMessage): Buffer {
  const out = Buffer.alloc(7 + message.data.length);
  out[0] = message.to;
  out[1] = (message.netFn & 0x3f) << 2;
  out[2] = checksum(out.subarray(0, 2));
  out[3] = message.from;
  out[4] = (message.seq & 0x3f) << 2;
  out[5] = message.cmd;
  message.data.copy(out, 6);
  out[out.length - 1] = checksum(out.subarray(3, out.length - 1));
  return out;
}

/** Decodes a message, checking both checksums; null when it is short or a checksum is wrong. */
export function decodeLanMessage(bytes: Buffer): LanMessage | null {
  if (bytes.length < 7) return null;
  if (checksum(bytes.subarray(0, 2)) !== bytes[2]) return null;
  if (checksum(bytes.subarray(3, bytes.length - 1)) !== bytes[bytes.length - 1]) return null;
  return {
    to: bytes[0] as number,
    netFn: (bytes[1] as number) >> 2,
    from: bytes[3] as number,
    seq: (bytes[4] as number) >> 2,
    cmd: bytes[5] as number,
    data: bytes.subarray(6, bytes.length - 1),
  };
}

/** A request from the console to the BMC. */
export function request(fields: { netFn: number; cmd: number; seq: number; data?: Buffer }): Buffer {
  return encodeLanMessage({
    to: BMC_ADDRESS,
    netFn: fields.netFn,
    from: CONSOLE_ADDRESS,
    seq: fields.seq,
    cmd: fields.cmd,
    data: fields.data ?? Buffer.alloc(0),
  });
}

/**
 * The response to `expected` in `bytes`: its completion code and data, or null when the bytes are not the
 * response to that request (another command, sequence or network function, or a bad checksum).
 */
export function responseTo(
  bytes: Buffer,
  expected: { netFn: number; cmd: number; seq: number },
): { completionCode: number; data: Buffer } | null {
  const message = decodeLanMessage(bytes);
  if (message === null || message.data.length < 1) return null;
  if (message.netFn !== expected.netFn + 1 || message.cmd !== expected.cmd) return null;
  if (message.seq !== (expected.seq & 0x3f)) return null;
  return { completionCode: message.data[0] as number, data: message.data.subarray(1) };
}

/** Get Channel Authentication Capabilities (§22.13): this channel, IPMI v2.0 data, at `privilege`. */
export function authCapabilitiesRequest(seq: number, privilege: number): Buffer {
  // 8Eh: bit 7 asks for the IPMI v2.0 extended data, 0Eh is "the channel this request came on"
  return request({
    netFn: NetFn.app,
    cmd: Command.getChannelAuthCapabilities,
    seq,
    data: Buffer.from([0x8e, privilege & 0x0f]),
  });
}

/** Whether a Get Channel Authentication Capabilities answer (data after the completion code) offers IPMI v2.0. */
export function supportsIpmi20(data: Buffer): boolean {
  // byte 2: bit 7 says extended capabilities follow; byte 4 (extended capabilities) bit 1: IPMI v2.0
  return data.length >= 8 && ((data[1] as number) & 0x80) !== 0 && ((data[3] as number) & 0x02) !== 0;
}

/** Get Chassis Status (§28.2) response data → whether the system power is on (byte 1, bit 0). */
export function powerIsOn(data: Buffer): boolean | null {
  if (data.length < 3) return null;
  return ((data[0] as number) & 0x01) !== 0;
}
