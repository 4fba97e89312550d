// RMCP and IPMI session framing (IPMI v2.0 §13.1-§13.8): the bytes of one UDP datagram, both ways.
// Every decoder here reads bytes a BMC (or anyone on the network) chose: it returns null on anything it
// does not understand and never throws.
import { createCipheriv, createDecipheriv, createHmac, randomFillSync, timingSafeEqual } from "node:crypto";

/** RMCP header (§13.1.3): version 1.0 (0x06), reserved, sequence 0xFF (no RMCP ACK), class IPMI (0x07). */
const RMCP_HEADER = Buffer.from([0x06, 0x00, 0xff, 0x07]);
const RMCP_LENGTH = RMCP_HEADER.length;
/** Session header's first byte: the authentication type, 0x06 for an RMCP+ (IPMI v2.0) packet (§13.6). */
export const AUTH_TYPE_RMCP_PLUS = 0x06;
/** IPMI v1.5 authentication type "none", used only for Get Channel Authentication Capabilities. */
const AUTH_TYPE_NONE = 0x00;

/** RMCP+ payload types (§13.27.3). */
export const PayloadType = {
  ipmi: 0x00,
  openSessionRequest: 0x10,
  openSessionResponse: 0x11,
  rakp1: 0x12,
  rakp2: 0x13,
  rakp3: 0x14,
  rakp4: 0x15,
} as const;

/** RMCP+ session header length: auth type, payload type, session ID, sequence, payload length (§13.6). */
const V20_HEADER_LENGTH = 12;
/** HMAC-SHA1-96: the integrity algorithm of cipher suite 3 keeps the first 12 bytes (§13.28.4). */
export const AUTH_CODE_LENGTH = 12;
const AES_BLOCK = 16;

const RANDOM_POOL_BYTES = 64 * 1024;
let randomPool = Buffer.alloc(0);
let randomAt = 0;

/**
 * `length` bytes from the system's CSPRNG, cut from a pool filled 64 KiB at a time (a status query needs
 * three 16-byte values: one call each cost more than the rest of its crypto). Each pool is fresh memory, so a
 * slice handed out is never overwritten.
 */
export function randomSlice(length: number): Buffer {
  if (randomAt + length > randomPool.length) {
    randomPool = randomFillSync(Buffer.allocUnsafe(RANDOM_POOL_BYTES));
    randomAt = 0;
  }
  randomAt += length;
  return randomPool.subarray(randomAt - length, randomAt);
}

/** K1 and K2 of an active session (§13.32): integrity key and the AES-128 key's source. */
export interface SessionKeys {
  k1: Buffer;
  k2: Buffer;
}

/** A decoded RMCP+ datagram; `payload` is in clear when the packet was encrypted and keys were given. */
export interface V20Packet {
  format: "v2.0";
  payloadType: number;
  encrypted: boolean;
  authenticated: boolean;
  sessionId: number;
  sequence: number;
  payload: Buffer;
}

/** A decoded IPMI v1.5 datagram (only ever session-less here: Get Channel Authentication Capabilities). */
export interface V15Packet {
  format: "v1.5";
  sessionId: number;
  sequence: number;
  payload: Buffer;
}

/** IPMI v1.5 packet with authentication type none (§13.6, §22.13 note: sent outside a session). */
export function encodeV15(message: Buffer): Buffer {
  const header = Buffer.alloc(RMCP_LENGTH + 10);
  RMCP_HEADER.copy(header, 0);
  header[RMCP_LENGTH] = AUTH_TYPE_NONE;
  // sequence 0 and session ID 0: outside a session
  header[RMCP_LENGTH + 9] = message.length;
  return Buffer.concat([header, message]);
}

/**
 * An RMCP+ packet. With `keys` the payload is encrypted with AES-CBC-128 (random IV, §13.29) and the packet
 * signed with HMAC-SHA1-96 (§13.28.4); without, it goes in clear (session set-up payloads).
 */
export function encodeV20(
  packet: { payloadType: number; sessionId: number; sequence: number; payload: Buffer },
  keys?: SessionKeys,
): Buffer {
  const body = keys ? encryptPayload(keys.k2, packet.payload) : packet.payload;
  const header = Buffer.alloc(RMCP_LENGTH + V20_HEADER_LENGTH);
  RMCP_HEADER.copy(header, 0);
  header[RMCP_LENGTH] = AUTH_TYPE_RMCP_PLUS;
  header[RMCP_LENGTH + 1] = packet.payloadType | (keys ? 0xc0 : 0);
  header.writeUInt32LE(packet.sessionId >>> 0, RMCP_LENGTH + 2);
  header.writeUInt32LE(packet.sequence >>> 0, RMCP_LENGTH + 6);
  header.writeUInt16LE(body.length, RMCP_LENGTH + 10);
  if (!keys) return Buffer.concat([header, body]);
  // integrity pad: from the auth type through the next header byte, a multiple of 4 bytes (§13.28.4)
  const padLength = (4 - ((V20_HEADER_LENGTH + body.length + 2) % 4)) % 4;
  const trailer = Buffer.alloc(padLength + 2, 0xff);
  trailer[padLength] = padLength;
  trailer[padLength + 1] = 0x07; // next header: reserved value 07h
  const signed = Buffer.concat([header, body, trailer]);
  return Buffer.concat([signed, integrityCode(keys.k1, signed.subarray(RMCP_LENGTH))]);
}

/** HMAC-SHA1-96 over the session header through the next header byte. */
export function integrityCode(k1: Buffer, signed: Buffer): Buffer {
  return createHmac("sha1", k1).update(signed).digest().subarray(0, AUTH_CODE_LENGTH);
}

/** AES-CBC-128 confidentiality (§13.29): IV, then data padded with 1, 2, 3, ... and the pad length. */
export function encryptPayload(k2: Buffer, data: Buffer, iv: Buffer = randomSlice(AES_BLOCK)): Buffer {
  const padLength = (AES_BLOCK - ((data.length + 1) % AES_BLOCK)) % AES_BLOCK;
  const clear = Buffer.alloc(data.length + padLength + 1);
  data.copy(clear, 0);
  for (let i = 0; i < padLength; i++) clear[data.length + i] = i + 1;
  clear[clear.length - 1] = padLength;
  const cipher = createCipheriv("aes-128-cbc", k2.subarray(0, AES_BLOCK), iv).setAutoPadding(false);
  return Buffer.concat([iv, cipher.update(clear), cipher.final()]);
}

/** The clear payload of an AES-CBC-128 body, or null when its length or padding is wrong. */
export function decryptPayload(k2: Buffer, body: Buffer): Buffer | null {
  if (body.length < 2 * AES_BLOCK || body.length % AES_BLOCK !== 0) return null;
  const decipher = createDecipheriv("aes-128-cbc", k2.subarray(0, AES_BLOCK), body.subarray(0, AES_BLOCK));
  decipher.setAutoPadding(false);
  const clear = Buffer.concat([decipher.update(body.subarray(AES_BLOCK)), decipher.final()]);
  const padLength = clear[clear.length - 1] as number;
  if (padLength >= AES_BLOCK || padLength + 1 > clear.length) return null;
  const dataLength = clear.length - 1 - padLength;
  for (let i = 0; i < padLength; i++) if (clear[dataLength + i] !== i + 1) return null;
  return clear.subarray(0, dataLength);
}

/** The session ID in an RMCP+ datagram's header without checking the rest (routing), or null. */
export function peekSessionId(datagram: Buffer): number | null {
  if (datagram.length < RMCP_LENGTH + V20_HEADER_LENGTH || !hasRmcpHeader(datagram)) return null;
  if (datagram[RMCP_LENGTH] !== AUTH_TYPE_RMCP_PLUS) return null;
  return datagram.readUInt32LE(RMCP_LENGTH + 2);
}

function hasRmcpHeader(datagram: Buffer): boolean {
  // the RMCP sequence byte is free (0xFF when no ACK is wanted, but BMCs echo others): not checked
  return datagram[0] === 0x06 && datagram[3] === 0x07;
}

/**
 * Decodes one datagram. An authenticated RMCP+ packet is checked with `keys.k1` and decrypted with
 * `keys.k2`; one that is authenticated or encrypted when no keys are given, or fails its check, gives null.
 * Never throws.
 */
export function decodeDatagram(datagram: Buffer, keys?: SessionKeys): V20Packet | V15Packet | null {
  if (datagram.length < RMCP_LENGTH + 1 || !hasRmcpHeader(datagram)) return null;
  const authType = datagram[RMCP_LENGTH] as number;
  if (authType === AUTH_TYPE_RMCP_PLUS) return decodeV20(datagram, keys);
  return decodeV15(datagram, authType);
}

function decodeV15(datagram: Buffer, authType: number): V15Packet | null {
  // auth type, sequence (4), session ID (4), a 16-byte auth code unless the type is none, message length
  const codeLength = authType === AUTH_TYPE_NONE ? 0 : 16;
  const lengthAt = RMCP_LENGTH + 9 + codeLength;
  if (authType > 0x05 || datagram.length <= lengthAt) return null;
  const length = datagram[lengthAt] as number;
  const start = lengthAt + 1;
  // a legacy pad byte may follow the message (§13.6 note), nothing more
  if (datagram.length < start + length || datagram.length > start + length + 1) return null;
  return {
    format: "v1.5",
    sequence: datagram.readUInt32LE(RMCP_LENGTH + 1),
    sessionId: datagram.readUInt32LE(RMCP_LENGTH + 5),
    payload: datagram.subarray(start, start + length),
  };
}

function decodeV20(datagram: Buffer, keys: SessionKeys | undefined): V20Packet | null {
  if (datagram.length < RMCP_LENGTH + V20_HEADER_LENGTH) return null;
  const typeByte = datagram[RMCP_LENGTH + 1] as number;
  const encrypted = (typeByte & 0x80) !== 0;
  const authenticated = (typeByte & 0x40) !== 0;
  const payloadType = typeByte & 0x3f;
  // OEM explicit payloads (type 02h) carry 6 more header bytes: no BMC answers one we never send
  if (payloadType === 0x02) return null;
  const length = datagram.readUInt16LE(RMCP_LENGTH + 10);
  const start = RMCP_LENGTH + V20_HEADER_LENGTH;
  const end = start + length;
  if (authenticated) {
    if (!keys) return null;
    // payload | pad (0-3) | pad length | next header | auth code (12)
    const trailer = datagram.length - end;
    if (trailer < 2 + AUTH_CODE_LENGTH || trailer > 5 + AUTH_CODE_LENGTH) return null;
    const padLength = datagram[datagram.length - AUTH_CODE_LENGTH - 2] as number;
    if (padLength !== trailer - 2 - AUTH_CODE_LENGTH) return null;
    const signedEnd = datagram.length - AUTH_CODE_LENGTH;
    const expected = integrityCode(keys.k1, datagram.subarray(RMCP_LENGTH, signedEnd));
    if (!timingSafeEqual(expected, datagram.subarray(signedEnd))) return null;
  } else if (datagram.length !== end) {
    return null;
  }
  if (encrypted && !keys) return null;
  const body = datagram.subarray(start, end);
  const payload = encrypted && keys ? decryptPayload(keys.k2, body) : body;
  if (payload === null) return null;
  return {
    format: "v2.0",
    payloadType,
    encrypted,
    authenticated,
    sessionId: datagram.readUInt32LE(RMCP_LENGTH + 2),
    sequence: datagram.readUInt32LE(RMCP_LENGTH + 6),
    payload,
  };
}
