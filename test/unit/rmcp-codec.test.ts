import { createHmac } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  authCapabilitiesRequest,
  checksum,
  Command,
  decodeLanMessage,
  NetFn,
  powerIsOn,
  request,
  responseTo,
  supportsIpmi20,
} from "../../conductor/drivers/ipmi/rmcp/message.ts";
import {
  decodeDatagram,
  decryptPayload,
  encodeV15,
  encodeV20,
  encryptPayload,
  PayloadType,
  peekSessionId,
} from "../../conductor/drivers/ipmi/rmcp/packet.ts";
import {
  decodeOpenSessionRequest,
  decodeOpenSessionResponse,
  decodeRakp1,
  decodeRakp2,
  decodeRakp3,
  decodeRakp4,
  encodeOpenSessionRequest,
  encodeOpenSessionResponse,
  encodeRakp1,
  encodeRakp2,
  encodeRakp3,
  encodeRakp4,
  rakp2AuthCode,
  rakp3AuthCode,
  rakp4Icv,
  sessionIntegrityKey,
  sessionKeys,
  SUITE_3,
} from "../../conductor/drivers/ipmi/rmcp/rakp.ts";
import type { RakpExchange } from "../../conductor/drivers/ipmi/rmcp/rakp.ts";

const hex = (text: string): Buffer => Buffer.from(text.replace(/\s+/g, ""), "hex");

const KEYS = sessionKeys(Buffer.alloc(20, 0x5a));

describe("IPMI LAN message (IPMI v2.0 §13.8)", () => {
  it("checksums make the checked bytes sum to zero modulo 256", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        const buffer = Buffer.from(bytes);
        const sum = [...buffer].reduce((a, b) => a + b, 0) + checksum(buffer);
        expect(sum % 256).toBe(0);
      }),
    );
  });

  it("Get Channel Authentication Capabilities is the classic probe, byte for byte", () => {
    // rsAddr 20h, netFn App (06h) << 2, checksum, rqAddr 81h, seq 0, cmd 38h, 8Eh (v2.0 data, this channel),
    // ADMINISTRATOR (04h), checksum; inside RMCP (06 00 FF 07) and a session-less v1.5 header (auth none)
    const datagram = encodeV15(authCapabilitiesRequest(0, 4));
    expect(datagram).toEqual(hex("0600ff07 00 00000000 00000000 09 2018c8 81003 88e04 b5".replace(/ /g, "")));
  });

  it("Get Chassis Status request: netFn Chassis 00h, command 01h", () => {
    expect(request({ netFn: NetFn.chassis, cmd: Command.getChassisStatus, seq: 1 })).toEqual(
      hex("2000e0 810401 7a"),
    );
  });

  it("a response is matched to its request by netFn + 1, command and sequence", () => {
    // a Get Chassis Status answer: power on (01h), last event 0, misc 0
    const answer = hex("8104 7b 20 08 01 00 01 00 00" + "d6");
    expect(decodeLanMessage(answer)).not.toBeNull();
    expect(responseTo(answer, { netFn: NetFn.chassis, cmd: Command.getChassisStatus, seq: 2 })).toEqual({
      completionCode: 0,
      data: hex("010000"),
    });
    expect(responseTo(answer, { netFn: NetFn.chassis, cmd: Command.getChassisStatus, seq: 3 })).toBeNull();
    expect(responseTo(answer, { netFn: NetFn.app, cmd: Command.getChassisStatus, seq: 2 })).toBeNull();
  });

  it("a flipped bit anywhere fails a checksum", () => {
    const good = request({ netFn: NetFn.app, cmd: Command.closeSession, seq: 5, data: hex("01020304") });
    fc.assert(
      fc.property(fc.nat(good.length - 1), fc.integer({ min: 0, max: 7 }), (at, bit) => {
        const bad = Buffer.from(good);
        bad[at] = (bad[at] as number) ^ (1 << bit);
        expect(decodeLanMessage(bad)).toBeNull();
      }),
    );
  });

  it("power state is bit 0 of the chassis status's first byte; IPMI v2.0 support is read from the capabilities", () => {
    expect(powerIsOn(hex("010000"))).toBe(true);
    expect(powerIsOn(hex("fe0000"))).toBe(false);
    expect(powerIsOn(hex("01"))).toBeNull();
    // channel 1, v2.0 extended data + none/MD5/password, status, extended: v1.5 and v2.0, OEM 0, aux 0
    expect(supportsIpmi20(hex("01 95 04 03 000000 00"))).toBe(true);
    expect(supportsIpmi20(hex("01 15 04 01 000000 00"))).toBe(false);
  });
});

describe("RMCP+ packets (§13.6, §13.28, §13.29)", () => {
  it("AES-CBC-128 pads with 1, 2, 3 … and the pad length, to whole blocks after the IV", () => {
    const iv = Buffer.alloc(16, 7);
    for (const length of [0, 1, 14, 15, 16, 31]) {
      const body = encryptPayload(KEYS.k2, Buffer.alloc(length, 0xaa), iv);
      expect(body.length).toBe(16 + Math.ceil((length + 1) / 16) * 16);
      expect(body.subarray(0, 16)).toEqual(iv);
      expect(decryptPayload(KEYS.k2, body)).toEqual(Buffer.alloc(length, 0xaa));
    }
  });

  it("an encrypted, signed packet has the integrity pad, pad length, next header 07h and 12 bytes of HMAC-SHA1-96", () => {
    const payload = request({ netFn: NetFn.chassis, cmd: Command.getChassisStatus, seq: 2 });
    const packet = encodeV20(
      { payloadType: PayloadType.ipmi, sessionId: 0x01020304, sequence: 9, payload },
      KEYS,
    );
    expect(packet.subarray(0, 6)).toEqual(hex("0600ff07 06 c0"));
    expect(packet.readUInt32LE(6)).toBe(0x01020304);
    expect(packet.readUInt32LE(10)).toBe(9);
    const bodyLength = packet.readUInt16LE(14);
    const signedLength = packet.length - 4 - 12;
    expect(signedLength % 4).toBe(0);
    expect(packet[packet.length - 13]).toBe(0x07);
    const padLength = packet[packet.length - 14] as number;
    expect(16 + bodyLength + padLength + 2 + 12).toBe(packet.length);
    const mac = createHmac("sha1", KEYS.k1)
      .update(packet.subarray(4, packet.length - 12))
      .digest();
    expect(packet.subarray(packet.length - 12)).toEqual(mac.subarray(0, 12));
    expect(peekSessionId(packet)).toBe(0x01020304);
    expect(decodeDatagram(packet, KEYS)).toMatchObject({
      format: "v2.0",
      encrypted: true,
      authenticated: true,
      payload,
    });
    expect(decodeDatagram(packet)).toBeNull(); // signed, and no keys to check it
    expect(decodeDatagram(packet, sessionKeys(Buffer.alloc(20, 1)))).toBeNull();
  });

  it("any change past the RMCP header to a signed packet is refused (fast-check)", () => {
    const payload = request({ netFn: NetFn.chassis, cmd: Command.getChassisStatus, seq: 2 });
    const good = encodeV20({ payloadType: PayloadType.ipmi, sessionId: 7, sequence: 1, payload }, KEYS);
    fc.assert(
      fc.property(
        fc.integer({ min: 4, max: good.length - 1 }),
        fc.integer({ min: 1, max: 255 }),
        (at, xor) => {
          const bad = Buffer.from(good);
          bad[at] = (bad[at] as number) ^ xor;
          expect(decodeDatagram(bad, KEYS)).toBeNull();
        },
      ),
    );
  });

  it("arbitrary datagrams never throw, with or without keys (fast-check)", () => {
    const rmcpLike = fc
      .tuple(fc.constantFrom(0x00, 0x06, 0x02), fc.uint8Array({ minLength: 0, maxLength: 120 }))
      .map(([authType, rest]) =>
        Buffer.concat([hex("0600ff07"), Buffer.from([authType]), Buffer.from(rest)]),
      );
    fc.assert(
      fc.property(
        fc.oneof(
          fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)),
          rmcpLike,
        ),
        (datagram) => {
          for (const keys of [undefined, KEYS]) {
            const packet = decodeDatagram(datagram, keys);
            if (packet !== null) expect(packet.payload.length).toBeLessThanOrEqual(datagram.length);
          }
          peekSessionId(datagram);
        },
      ),
      { numRuns: 3000 },
    );
  });

  it("truncated or lengthened signed packets are refused", () => {
    const payload = request({ netFn: NetFn.app, cmd: Command.closeSession, seq: 3, data: hex("01000000") });
    const good = encodeV20({ payloadType: PayloadType.ipmi, sessionId: 7, sequence: 2, payload }, KEYS);
    for (let length = 0; length < good.length; length++)
      expect(decodeDatagram(good.subarray(0, length), KEYS)).toBeNull();
    expect(decodeDatagram(Buffer.concat([good, hex("00")]), KEYS)).toBeNull();
  });
});

describe("RMCP+ session set-up (§13.17-§13.23, §13.31-§13.32)", () => {
  const x: RakpExchange = {
    consoleSessionId: 0xa0a1a2a3,
    bmcSessionId: 0x00000102,
    consoleRandom: Buffer.alloc(16, 0x11),
    bmcRandom: Buffer.alloc(16, 0x22),
    bmcGuid: Buffer.alloc(16, 0x33),
    role: 0x14,
    username: Buffer.from("admin"),
  };
  const kuid = Buffer.from("s3cret");

  it("Open Session Request carries suite 3's three algorithm records", () => {
    const bytes = encodeOpenSessionRequest({
      tag: 1,
      privilege: 4,
      consoleSessionId: 0xa0a1a2a3,
      ...SUITE_3,
    });
    expect(bytes).toEqual(
      hex("01 04 0000 a3a2a1a0" + "00000008 01000000" + "01000008 01000000" + "02000008 01000000"),
    );
    expect(decodeOpenSessionRequest(bytes)).toEqual({
      tag: 1,
      privilege: 4,
      consoleSessionId: 0xa0a1a2a3,
      ...SUITE_3,
    });
  });

  it("RAKP 1 is tag, session ID, Rm, role, user name length and name", () => {
    const bytes = encodeRakp1({
      tag: 2,
      bmcSessionId: 0x102,
      consoleRandom: x.consoleRandom,
      role: 0x14,
      username: x.username,
    });
    expect(bytes).toEqual(
      hex("02 000000 02010000" + "11".repeat(16) + "14 0000 05" + Buffer.from("admin").toString("hex")),
    );
    expect(decodeRakp1(bytes)).toMatchObject({
      tag: 2,
      bmcSessionId: 0x102,
      role: 0x14,
      username: x.username,
    });
  });

  it("the RAKP codes and keys hash the fields in the order §13.31 lists them", () => {
    const sid = (n: number) => {
      const b = Buffer.alloc(4);
      b.writeUInt32LE(n);
      return b;
    };
    const mac = (key: Buffer, ...parts: Buffer[]) =>
      createHmac("sha1", key).update(Buffer.concat(parts)).digest();
    const nameBlock = Buffer.concat([hex("14 05"), x.username]);
    expect(rakp2AuthCode(kuid, x)).toEqual(
      mac(
        kuid,
        sid(x.consoleSessionId),
        sid(x.bmcSessionId),
        x.consoleRandom,
        x.bmcRandom,
        x.bmcGuid,
        nameBlock,
      ),
    );
    expect(rakp3AuthCode(kuid, x)).toEqual(mac(kuid, x.bmcRandom, sid(x.consoleSessionId), nameBlock));
    const sik = sessionIntegrityKey(kuid, x);
    expect(sik).toEqual(mac(kuid, x.consoleRandom, x.bmcRandom, nameBlock));
    expect(rakp4Icv(sik, x)).toEqual(
      mac(sik, x.consoleRandom, sid(x.bmcSessionId), x.bmcGuid).subarray(0, 12),
    );
    expect(sessionKeys(sik)).toEqual({
      k1: mac(sik, Buffer.alloc(20, 1)),
      k2: mac(sik, Buffer.alloc(20, 2)),
    });
  });

  it("every set-up payload survives its round trip", () => {
    const response = {
      tag: 1,
      status: 0,
      privilege: 4,
      consoleSessionId: 9,
      bmcSessionId: 10,
      ...SUITE_3,
    };
    expect(decodeOpenSessionResponse(encodeOpenSessionResponse(response))).toEqual(response);
    expect(decodeOpenSessionResponse(encodeOpenSessionResponse({ ...response, status: 1 }))).toMatchObject({
      status: 1,
    });
    const rakp2 = {
      tag: 2,
      status: 0,
      consoleSessionId: 9,
      bmcRandom: x.bmcRandom,
      bmcGuid: x.bmcGuid,
      authCode: Buffer.alloc(20, 4),
    };
    expect(decodeRakp2(encodeRakp2(rakp2))).toEqual(rakp2);
    const rakp3 = { tag: 3, status: 0, bmcSessionId: 10, authCode: Buffer.alloc(20, 5) };
    expect(decodeRakp3(encodeRakp3(rakp3))).toEqual(rakp3);
    const rakp4 = { tag: 3, status: 0, consoleSessionId: 9, icv: Buffer.alloc(12, 6) };
    expect(decodeRakp4(encodeRakp4(rakp4))).toEqual(rakp4);
  });

  it("set-up decoders never throw on arbitrary bytes (fast-check)", () => {
    const decoders = [
      decodeOpenSessionRequest,
      decodeOpenSessionResponse,
      decodeRakp1,
      decodeRakp2,
      decodeRakp3,
      decodeRakp4,
      decodeLanMessage,
    ];
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 80 }), (bytes) => {
        for (const decode of decoders) decode(Buffer.from(bytes));
        responseTo(Buffer.from(bytes), { netFn: 0, cmd: 1, seq: 1 });
      }),
      { numRuns: 3000 },
    );
  });
});
