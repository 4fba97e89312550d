// RMCP+ session set-up (IPMI v2.0 §13.17-§13.23, §13.31-§13.32) for cipher suite 3: RAKP-HMAC-SHA1
// authentication, HMAC-SHA1-96 integrity, AES-CBC-128 confidentiality. Both sides' payloads are here (the
// console's, and the BMC's for the test fleet); decoders return null and never throw.
import { createHmac } from "node:crypto";
import type { SessionKeys } from "./packet.ts";

/** Cipher suite 3's algorithms (§13.28, table 22-20). */
export const SUITE_3 = { authentication: 0x01, integrity: 0x01, confidentiality: 0x01 } as const;

/** Privilege levels (§22.13 / §13.17). */
export const Privilege = { CALLBACK: 1, USER: 2, OPERATOR: 3, ADMINISTRATOR: 4 } as const;
export type PrivilegeName = keyof typeof Privilege;

/** RAKP 1's role byte: bit 4 set asks the BMC to find the user by name only, as ipmitool does. */
export const NAME_ONLY_LOOKUP = 0x10;

/** RMCP+ status codes (§13.24) that a BMC may answer session set-up with, for messages. */
const STATUS_TEXT: Record<number, string> = {
  0x01: "insufficient resources to create a session",
  0x02: "invalid session ID",
  0x03: "invalid payload type",
  0x04: "invalid authentication algorithm",
  0x05: "invalid integrity algorithm",
  0x06: "no matching authentication payload",
  0x07: "no matching integrity payload",
  0x08: "inactive session ID",
  0x09: "invalid role",
  0x0a: "unauthorized role or privilege level requested",
  0x0b: "insufficient resources to create a session at the requested role",
  0x0c: "invalid name length",
  0x0d: "unauthorized name",
  0x0e: "unauthorized GUID",
  0x0f: "invalid integrity check value",
  0x10: "invalid confidentiality algorithm",
  0x11: "no cipher suite match with proposed security algorithms",
  0x12: "illegal or unrecognized parameter",
};

export function statusText(status: number): string {
  return STATUS_TEXT[status] ?? `status 0x${status.toString(16).padStart(2, "0")}`;
}

export interface OpenSessionRequest {
  tag: number;
  /** Requested maximum privilege (0: the highest the proposed algorithms allow). */
  privilege: number;
  consoleSessionId: number;
  authentication: number;
  integrity: number;
  confidentiality: number;
}

export interface OpenSessionResponse {
  tag: number;
  status: number;
  privilege: number;
  consoleSessionId: number;
  /** Absent when status is not 0. */
  bmcSessionId: number;
  authentication: number;
  integrity: number;
  confidentiality: number;
}

function algorithmRecord(type: number, algorithm: number): Buffer {
  // payload type, reserved (2), payload length 08h, algorithm, reserved (3)
  return Buffer.from([type, 0, 0, 0x08, algorithm & 0x3f, 0, 0, 0]);
}

function algorithmOf(record: Buffer, type: number): number | null {
  if (record.length !== 8 || record[0] !== type || record[3] !== 0x08) return null;
  return (record[4] as number) & 0x3f;
}

function algorithms(bytes: Buffer, at: number): [number, number, number] | null {
  const auth = algorithmOf(bytes.subarray(at, at + 8), 0x00);
  const integrity = algorithmOf(bytes.subarray(at + 8, at + 16), 0x01);
  const confidentiality = algorithmOf(bytes.subarray(at + 16, at + 24), 0x02);
  return auth === null || integrity === null || confidentiality === null
    ? null
    : [auth, integrity, confidentiality];
}

/** §13.17 */
export function encodeOpenSessionRequest(request: OpenSessionRequest): Buffer {
  const head = Buffer.alloc(8);
  head[0] = request.tag;
  head[1] = request.privilege & 0x0f;
  head.writeUInt32LE(request.consoleSessionId >>> 0, 4);
  return Buffer.concat([
    head,
    algorithmRecord(0x00, request.authentication),
    algorithmRecord(0x01, request.integrity),
    algorithmRecord(0x02, request.confidentiality),
  ]);
}

export function decodeOpenSessionRequest(bytes: Buffer): OpenSessionRequest | null {
  if (bytes.length !== 32) return null;
  const algos = algorithms(bytes, 8);
  if (algos === null) return null;
  return {
    tag: bytes[0] as number,
    privilege: (bytes[1] as number) & 0x0f,
    consoleSessionId: bytes.readUInt32LE(4),
    authentication: algos[0],
    integrity: algos[1],
    confidentiality: algos[2],
  };
}

/** §13.18; a failure (status ≠ 0) carries only the first 8 bytes. */
export function encodeOpenSessionResponse(response: OpenSessionResponse): Buffer {
  const head = Buffer.alloc(response.status === 0 ? 12 : 8);
  head[0] = response.tag;
  head[1] = response.status;
  head[2] = response.privilege & 0x0f;
  head.writeUInt32LE(response.consoleSessionId >>> 0, 4);
  if (response.status !== 0) return head;
  head.writeUInt32LE(response.bmcSessionId >>> 0, 8);
  return Buffer.concat([
    head,
    algorithmRecord(0x00, response.authentication),
    algorithmRecord(0x01, response.integrity),
    algorithmRecord(0x02, response.confidentiality),
  ]);
}

export function decodeOpenSessionResponse(bytes: Buffer): OpenSessionResponse | null {
  if (bytes.length < 8) return null;
  const base = {
    tag: bytes[0] as number,
    status: bytes[1] as number,
    privilege: (bytes[2] as number) & 0x0f,
    consoleSessionId: bytes.readUInt32LE(4),
  };
  if (base.status !== 0)
    return { ...base, bmcSessionId: 0, authentication: 0, integrity: 0, confidentiality: 0 };
  if (bytes.length !== 36) return null;
  const algos = algorithms(bytes, 12);
  if (algos === null) return null;
  return {
    ...base,
    bmcSessionId: bytes.readUInt32LE(8),
    authentication: algos[0],
    integrity: algos[1],
    confidentiality: algos[2],
  };
}

export interface Rakp1 {
  tag: number;
  bmcSessionId: number;
  /** Rm: 16 random bytes. */
  consoleRandom: Buffer;
  /** Requested maximum privilege and the lookup bit, as sent (ROLEm). */
  role: number;
  /** At most 16 bytes. */
  username: Buffer;
}

/** §13.20 */
export function encodeRakp1(message: Rakp1): Buffer {
  const out = Buffer.alloc(28 + message.username.length);
  out[0] = message.tag;
  out.writeUInt32LE(message.bmcSessionId >>> 0, 4);
  message.consoleRandom.copy(out, 8, 0, 16);
  out[24] = message.role;
  out[27] = message.username.length;
  message.username.copy(out, 28);
  return out;
}

export function decodeRakp1(bytes: Buffer): Rakp1 | null {
  if (bytes.length < 28) return null;
  const length = bytes[27] as number;
  if (length > 16 || bytes.length !== 28 + length) return null;
  return {
    tag: bytes[0] as number,
    bmcSessionId: bytes.readUInt32LE(4),
    consoleRandom: bytes.subarray(8, 24),
    role: bytes[24] as number,
    username: bytes.subarray(28),
  };
}

export interface Rakp2 {
  tag: number;
  status: number;
  consoleSessionId: number;
  /** Rc */
  bmcRandom: Buffer;
  /** GUIDc */
  bmcGuid: Buffer;
  /** HMAC-SHA1 (20 bytes) proving the BMC knows the user's key; empty on failure. */
  authCode: Buffer;
}

/** §13.21 */
export function encodeRakp2(message: Rakp2): Buffer {
  const head = Buffer.alloc(8);
  head[0] = message.tag;
  head[1] = message.status;
  head.writeUInt32LE(message.consoleSessionId >>> 0, 4);
  if (message.status !== 0) return head;
  return Buffer.concat([head, message.bmcRandom, message.bmcGuid, message.authCode]);
}

export function decodeRakp2(bytes: Buffer): Rakp2 | null {
  if (bytes.length < 8) return null;
  const base = {
    tag: bytes[0] as number,
    status: bytes[1] as number,
    consoleSessionId: bytes.readUInt32LE(4),
  };
  const empty = Buffer.alloc(0);
  if (base.status !== 0) return { ...base, bmcRandom: empty, bmcGuid: empty, authCode: empty };
  if (bytes.length !== 60) return null;
  return {
    ...base,
    bmcRandom: bytes.subarray(8, 24),
    bmcGuid: bytes.subarray(24, 40),
    authCode: bytes.subarray(40, 60),
  };
}

export interface Rakp3 {
  tag: number;
  status: number;
  bmcSessionId: number;
  /** HMAC-SHA1 (20 bytes) proving the console knows the user's key; empty on failure. */
  authCode: Buffer;
}

/** §13.22 */
export function encodeRakp3(message: Rakp3): Buffer {
  const head = Buffer.alloc(8);
  head[0] = message.tag;
  head[1] = message.status;
  head.writeUInt32LE(message.bmcSessionId >>> 0, 4);
  return Buffer.concat([head, message.authCode]);
}

export function decodeRakp3(bytes: Buffer): Rakp3 | null {
  if (bytes.length !== 8 && bytes.length !== 28) return null;
  return {
    tag: bytes[0] as number,
    status: bytes[1] as number,
    bmcSessionId: bytes.readUInt32LE(4),
    authCode: bytes.subarray(8),
  };
}

export interface Rakp4 {
  tag: number;
  status: number;
  consoleSessionId: number;
  /** HMAC-SHA1-96 (12 bytes) under the session key; empty on failure. */
  icv: Buffer;
}

/** §13.23 */
export function encodeRakp4(message: Rakp4): Buffer {
  const head = Buffer.alloc(8);
  head[0] = message.tag;
  head[1] = message.status;
  head.writeUInt32LE(message.consoleSessionId >>> 0, 4);
  return Buffer.concat([head, message.icv]);
}

export function decodeRakp4(bytes: Buffer): Rakp4 | null {
  if (bytes.length < 8) return null;
  const base = {
    tag: bytes[0] as number,
    status: bytes[1] as number,
    consoleSessionId: bytes.readUInt32LE(4),
  };
  if (base.status !== 0) return { ...base, icv: Buffer.alloc(0) };
  if (bytes.length !== 20) return null;
  return { ...base, icv: bytes.subarray(8, 20) };
}

/** What both sides know once RAKP 2 is in: the inputs of every RAKP code and key (§13.31). */
export interface RakpExchange {
  consoleSessionId: number;
  bmcSessionId: number;
  consoleRandom: Buffer;
  bmcRandom: Buffer;
  bmcGuid: Buffer;
  role: number;
  username: Buffer;
}

function u32(value: number): Buffer {
  const out = Buffer.alloc(4);
  out.writeUInt32LE(value >>> 0, 0);
  return out;
}

function hmac(key: Buffer, parts: Buffer[]): Buffer {
  const mac = createHmac("sha1", key);
  for (const part of parts) mac.update(part);
  return mac.digest();
}

function roleAndName(x: RakpExchange): Buffer {
  return Buffer.concat([Buffer.from([x.role, x.username.length]), x.username]);
}

/** RAKP 2's code: HMAC_Kuid(SIDm, SIDc, Rm, Rc, GUIDc, ROLEm, ULENGTHm, UNAMEm) (§13.31). */
export function rakp2AuthCode(kuid: Buffer, x: RakpExchange): Buffer {
  return hmac(kuid, [
    u32(x.consoleSessionId),
    u32(x.bmcSessionId),
    x.consoleRandom,
    x.bmcRandom,
    x.bmcGuid,
    roleAndName(x),
  ]);
}

/** RAKP 3's code: HMAC_Kuid(Rc, SIDm, ROLEm, ULENGTHm, UNAMEm) (§13.31). */
export function rakp3AuthCode(kuid: Buffer, x: RakpExchange): Buffer {
  return hmac(kuid, [x.bmcRandom, u32(x.consoleSessionId), roleAndName(x)]);
}

/** The session integrity key: HMAC_Kg(Rm, Rc, ROLEm, ULENGTHm, UNAMEm), Kg = Kuid when the BMC has none. */
export function sessionIntegrityKey(kg: Buffer, x: RakpExchange): Buffer {
  return hmac(kg, [x.consoleRandom, x.bmcRandom, roleAndName(x)]);
}

/** RAKP 4's integrity check value: HMAC_SIK(Rm, SIDc, GUIDc), first 12 bytes (§13.31). */
export function rakp4Icv(sik: Buffer, x: RakpExchange): Buffer {
  return hmac(sik, [x.consoleRandom, u32(x.bmcSessionId), x.bmcGuid]).subarray(0, 12);
}

/** K1 = HMAC_SIK(20 × 01h), K2 = HMAC_SIK(20 × 02h) (§13.32). */
export function sessionKeys(sik: Buffer): SessionKeys {
  return { k1: hmac(sik, [Buffer.alloc(20, 0x01)]), k2: hmac(sik, [Buffer.alloc(20, 0x02)]) };
}

/**
 * Kuid: the user's password (the HMAC pads it with zeros to 20 bytes, as the spec does); null past IPMI
 * v2.0's 20 bytes, which ipmitool refuses too rather than send a key the BMC cannot hold.
 */
export function userKey(password: string): Buffer | null {
  const key = Buffer.from(password, "utf8");
  return key.length > 20 ? null : key;
}
