import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CollectorDataSchema } from "../../shared/inventory.ts";
import { LldpRawSchema, type RawTlv, localLinkFromLldp, parseLldp, splitTlvs } from "../../shared/lldp.ts";

/** The TLVs of a frame lldpd 1.0.16 sent in the lab (chassis MAC, port "Ethernet1/7", name "lab-switch-1"). */
const LLDPD_FRAME: RawTlv[] = [
  [1, "045e4258d0f2d6"],
  [2, "0745746865726e6574312f37"],
  [3, "0004"],
  [5, "6c61622d7377697463682d31"],
  [7, "009c0080"],
  [8, "1102fe800000000000005c4258fffed0f2d6020000000200"],
  [4, "7261636b2034206e6f6465203132"],
  [127, "00120f030100000000"],
  [0, ""],
];

/** One TLV's bytes: the 7-bit type and 9-bit length header, then the value. */
function encodeTlv(type: number, value: Uint8Array): Uint8Array {
  const header = (type << 9) | value.length;
  return Uint8Array.from([header >> 8, header & 0xff, ...value]);
}
const concat = (parts: Uint8Array[]): Uint8Array => Uint8Array.from(parts.flatMap((part) => [...part]));
const hex = (text: string): string => Buffer.from(text, "utf8").toString("hex");

describe("LLDP TLVs", () => {
  it("reads what lldpd announced as Ironic's parse-lldp hook names it", () => {
    expect(parseLldp(LLDPD_FRAME)).toEqual({
      switch_chassis_id: "5e:42:58:d0:f2:d6",
      switch_port_id: "Ethernet1/7",
      switch_system_name: "lab-switch-1",
      switch_port_description: "rack 4 node 12",
      switch_mgmt_addresses: ["fe80::5c42:58ff:fed0:f2d6"],
    });
  });

  it("gives local_link_connection as Ironic's hook does, keeping the operator's keys", () => {
    expect(localLinkFromLldp(LLDPD_FRAME)).toEqual({
      switch_id: "5e:42:58:d0:f2:d6",
      port_id: "Ethernet1/7",
      switch_info: "lab-switch-1",
    });
    expect(localLinkFromLldp(LLDPD_FRAME, { port_id: "Te1/0/1", switch_info: "" })).toEqual({
      switch_id: "5e:42:58:d0:f2:d6",
    });
  });

  it("takes switch_id only from a MAC chassis id, port_id from any subtype Ironic decodes", () => {
    const named: RawTlv[] = [
      [1, `07${hex("spine-1")}`], // chassis subtype local: a name, not a MAC
      [2, "03aabbccddeeff"], // port subtype MAC
    ];
    expect(localLinkFromLldp(named)).toEqual({ port_id: "aa:bb:cc:dd:ee:ff" });
    expect(parseLldp(named)).toMatchObject({ switch_chassis_id: "spine-1" });
    expect(localLinkFromLldp([[2, "04010a000001"]])).toEqual({ port_id: "10.0.0.1" }); // network address
  });

  it("reads 802.1 VLANs and the 802.3 MTU", () => {
    const vlanName = (id: number, name: string): RawTlv => [
      127,
      `0080c203${id.toString(16).padStart(4, "0")}${name.length.toString(16).padStart(2, "0")}${hex(name)}`,
    ];
    const parsed = parseLldp([
      [127, "0080c2010064"],
      vlanName(100, "prov"),
      vlanName(2001, "tenant-a"),
      [127, "00120f042328"],
    ]);
    expect(parsed).toEqual({
      switch_port_untagged_vlan_id: 100,
      switch_port_vlans: [
        { id: 100, name: "prov" },
        { id: 2001, name: "tenant-a" },
      ],
      switch_port_mtu: 9000,
    });
  });

  it("skips what Ironic skips: bad hex, bad UTF-8, short MACs, unknown subtypes", () => {
    expect(
      parseLldp([
        [1, "04aabb"],
        [2, "zz"],
        [5, "ff"],
        [2, "09616263"],
        [127, "0080c20300640a61"], // VLAN name longer than the TLV
      ]),
    ).toEqual({});
  });

  it("splits a frame and stops at the End TLV (what follows is padding)", () => {
    const pdu = concat([
      encodeTlv(1, Uint8Array.from([4, 1, 2, 3, 4, 5, 6])),
      encodeTlv(5, Buffer.from("sw")),
      encodeTlv(0, new Uint8Array()),
      new Uint8Array(20),
    ]);
    expect(splitTlvs(pdu)).toEqual([
      [1, "04010203040506"],
      [5, "7377"],
      [0, ""],
    ]);
  });

  it("splits any generated TLV list back into itself (fast-check)", () => {
    const tlv = fc.record({
      type: fc.integer({ min: 1, max: 127 }),
      value: fc.uint8Array({ maxLength: 511 }),
    });
    fc.assert(
      fc.property(fc.array(tlv, { maxLength: 20 }), (tlvs) => {
        const pdu = concat([...tlvs.map((t) => encodeTlv(t.type, t.value)), encodeTlv(0, new Uint8Array())]);
        const split = splitTlvs(pdu);
        expect(split).toEqual([...tlvs.map((t) => [t.type, Buffer.from(t.value).toString("hex")]), [0, ""]]);
        expect(LldpRawSchema.safeParse({ eth0: split }).success).toBe(true);
      }),
    );
  });

  it("never throws on arbitrary bytes, and never reports more than the frame holds (fast-check)", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 1600 }), (bytes) => {
        const split = splitTlvs(bytes);
        const total = split.reduce((sum, [, value]) => sum + 2 + value.length / 2, 0);
        expect(total).toBeLessThanOrEqual(bytes.length);
        for (const [type, value] of split) {
          expect(type).toBeGreaterThanOrEqual(0);
          expect(type).toBeLessThanOrEqual(127);
          expect(value.length / 2).toBeLessThanOrEqual(511);
        }
        parseLldp(split);
        localLinkFromLldp(split);
      }),
    );
  });

  it("parses arbitrary TLV lists without throwing, values of the right types (fast-check)", () => {
    const typed = fc.tuple(
      fc.constantFrom(0, 1, 2, 4, 5, 6, 8, 127, 3, 9),
      fc.oneof(
        fc.uint8Array({ maxLength: 40 }).map((b) => Buffer.from(b).toString("hex")),
        fc.string({ maxLength: 20 }),
        fc
          .tuple(
            fc.constantFrom("0080c201", "0080c203", "00120f04", "04", "03", "0504", "0406", "0502"),
            fc.uint8Array({ maxLength: 20 }),
          )
          .map(([prefix, b]) => prefix + Buffer.from(b).toString("hex")),
      ),
    );
    fc.assert(
      fc.property(
        fc.array(typed, { maxLength: 12 }),
        fc.dictionary(fc.constantFrom("switch_id", "port_id"), fc.string()),
        (tlvs, existing) => {
          const parsed = parseLldp(tlvs as RawTlv[]);
          for (const key of ["switch_chassis_id", "switch_port_id", "switch_system_name"] as const) {
            if (parsed[key] !== undefined) expect(typeof parsed[key]).toBe("string");
          }
          const link = localLinkFromLldp(tlvs as RawTlv[], existing);
          for (const key of Object.keys(existing)) expect(link).not.toHaveProperty(key);
          if (link.switch_id !== undefined) expect(link.switch_id).toMatch(/^([0-9a-f]{2}:){5}[0-9a-f]{2}$/);
        },
      ),
    );
  });

  it("refuses plugin data that is not IPA's lldp_raw shape", () => {
    expect(CollectorDataSchema.safeParse({ lldp_raw: { eth0: [[1, "0x04"]] } }).success).toBe(false);
    expect(CollectorDataSchema.safeParse({ lldp_raw: { eth0: [[128, ""]] } }).success).toBe(false);
    expect(CollectorDataSchema.safeParse({ lldp_raw: { eth0: [[1, "abc"]] } }).success).toBe(false);
    expect(CollectorDataSchema.safeParse({ lldp_raw: { eth0: LLDPD_FRAME, eth1: [] } }).success).toBe(true);
  });
});
