import { createSocket } from "node:dgram";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseIpmiDriverInfo } from "../../conductor/drivers/ipmi/driver-info.ts";
import { IpmiCommandError, Ipmitool } from "../../conductor/drivers/ipmi/ipmitool.ts";
import { RmcpClient } from "../../conductor/drivers/ipmi/rmcp/client.ts";
import { decodeDatagram, encodeV20, PayloadType } from "../../conductor/drivers/ipmi/rmcp/packet.ts";
import type { V20Packet } from "../../conductor/drivers/ipmi/rmcp/packet.ts";
import {
  decodeOpenSessionResponse,
  decodeRakp2,
  encodeOpenSessionRequest,
  encodeRakp1,
  SUITE_3,
} from "../../conductor/drivers/ipmi/rmcp/rakp.ts";
import { ipmipowerStat } from "../../scripts/bench/ipmipower.ts";
import { freeUdpPort } from "../helpers/ipmi-sim.ts";
import { RmcpBmcFleet } from "../helpers/rmcp-fleet.ts";
import { waitFor } from "../helpers/wait.ts";

const USER = "admin";
const PASSWORD = "fleet-pw-9";

// The bench's stand-in BMCs, proven against the real clients: ipmitool (lanplus, suite 3) and ipmipower.
describe("the stand-in RMCP+ fleet answers real IPMI clients", () => {
  let fleet: RmcpBmcFleet;
  const ipmitool = new Ipmitool({ minIntervalMs: 0, retries: 0 });
  const client = new RmcpClient({ packetTimeoutMs: 300, retries: 0 });
  const infoOf = (index: number, password = PASSWORD) =>
    parseIpmiDriverInfo({
      ipmi_address: fleet.targets()[index]!.host,
      ipmi_port: fleet.port,
      ipmi_username: USER,
      ipmi_password: password,
    });
  const targetOf = (index: number) => ({
    ...fleet.targets()[index]!,
    username: USER,
    password: PASSWORD,
    privilege: "ADMINISTRATOR" as const,
  });

  beforeAll(async () => {
    fleet = await RmcpBmcFleet.start({
      count: 4,
      port: await freeUdpPort(),
      username: USER,
      password: PASSWORD,
      powerOf: (i) => i % 2 === 0,
    });
  });
  afterAll(async () => {
    await client.close();
    await fleet.stop();
  });

  it("ipmitool -I lanplus reads each BMC's own power, and the session is closed after", async () => {
    for (let i = 0; i < 4; i++) {
      const out = await ipmitool.run(infoOf(i), ["chassis", "power", "status"]);
      expect(out).toContain(`Chassis Power is ${fleet.power(i) ? "on" : "off"}`);
      expect(fleet.openSessions(i)).toBe(0);
    }
  });

  it("ipmitool switches a BMC and the native client sees it", async () => {
    await ipmitool.run(infoOf(1), ["chassis", "power", "on"]);
    expect(fleet.power(1)).toBe(true);
    expect(await client.powerIsOn(targetOf(1))).toBe(true);
    await ipmitool.run(infoOf(1), ["chassis", "power", "off"]);
    expect(await client.powerIsOn(targetOf(1))).toBe(false);
    // the native client sends Close Session without waiting for its answer
    await waitFor(() => fleet.openSessions(1) === 0, { what: "the session closed", intervalMs: 5 });
  });

  it("ipmitool with a wrong password is refused by the stand-in as by a BMC", async () => {
    const error = await ipmitool
      .run(infoOf(0, "wrong-pw"), ["chassis", "power", "status"])
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(IpmiCommandError);
    expect((error as IpmiCommandError).kind).toBe("auth");
  });

  it("ipmipower --stat reads every BMC in one process", async () => {
    const { answers } = await ipmipowerStat(
      fleet.targets().map((t) => `${t.host}:${t.port}`),
      { username: USER, password: PASSWORD },
    );
    const byHost = new Map(answers.map((a) => [a.host, a.state]));
    for (const t of fleet.targets()) expect(byHost.get(t.host)).toBe(fleet.power(t.index) ? "on" : "off");
  });

  it("a repeated RAKP 1 gets the same RAKP 2, as a resend after a late answer must", async () => {
    const socket = createSocket("udp4");
    const answers: Buffer[] = [];
    socket.on("message", (datagram) => answers.push(datagram));
    await new Promise<void>((resolve) => socket.bind(0, "127.0.0.1", () => resolve()));
    const target = fleet.targets()[3]!;
    const send = (bytes: Buffer) =>
      new Promise<void>((resolve) => socket.send(bytes, target.port, target.host, () => resolve()));
    const setUp = (payloadType: number, payload: Buffer) =>
      encodeV20({ payloadType, sessionId: 0, sequence: 0, payload });
    try {
      await send(
        setUp(
          PayloadType.openSessionRequest,
          encodeOpenSessionRequest({ tag: 1, privilege: 4, consoleSessionId: 77, ...SUITE_3 }),
        ),
      );
      await waitFor(() => answers.length === 1, { what: "the open session response", intervalMs: 5 });
      const opened = decodeOpenSessionResponse((decodeDatagram(answers[0]!) as V20Packet).payload)!;
      const rakp1 = encodeRakp1({
        tag: 2,
        bmcSessionId: opened.bmcSessionId,
        consoleRandom: Buffer.alloc(16, 9),
        role: 0x14,
        username: Buffer.from(USER),
      });
      await send(setUp(PayloadType.rakp1, rakp1));
      await send(setUp(PayloadType.rakp1, rakp1));
      await waitFor(() => answers.length === 3, { what: "two RAKP 2", intervalMs: 5 });
      expect(answers[2]).toEqual(answers[1]);
      expect(decodeRakp2((decodeDatagram(answers[1]!) as V20Packet).payload)).toMatchObject({
        status: 0,
        consoleSessionId: 77,
      });
    } finally {
      socket.close();
    }
  });

  it("garbage sent to a stand-in BMC is dropped and it keeps answering (fast-check)", async () => {
    const socket = createSocket("udp4");
    const target = fleet.targets()[2]!;
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 96 }), async (bytes) => {
        const rmcp = Buffer.concat([Buffer.from([0x06, 0x00, 0xff, 0x07]), Buffer.from(bytes)]);
        await new Promise<void>((resolve) => socket.send(rmcp, target.port, target.host, () => resolve()));
      }),
      { numRuns: 300 },
    );
    socket.close();
    expect(await client.powerIsOn(targetOf(2))).toBe(fleet.power(2));
  });

  it("a 'BMC' answering every packet with garbage leaves the client unanswered, never thrown off (fast-check)", async () => {
    const liar = createSocket("udp4");
    await new Promise<void>((resolve) => liar.bind(0, "127.0.0.1", () => resolve()));
    let reply = Buffer.alloc(0);
    liar.on("message", (_datagram, remote) => liar.send(reply, remote.port, remote.address));
    const hostile = new RmcpClient({ packetTimeoutMs: 30, packetRetries: 0, retries: 0 });
    try {
      await fc.assert(
        fc.asyncProperty(
          fc.uint8Array({ maxLength: 80 }),
          fc.constantFrom(0x00, 0x06),
          async (bytes, authType) => {
            reply = Buffer.concat([Buffer.from([0x06, 0x00, 0xff, 0x07, authType]), Buffer.from(bytes)]);
            const target = {
              host: "127.0.0.1",
              port: liar.address().port,
              username: USER,
              password: PASSWORD,
              privilege: "ADMINISTRATOR" as const,
            };
            const error = await hostile.powerIsOn(target).catch((e: unknown) => e);
            expect(error).toBeInstanceOf(IpmiCommandError);
          },
        ),
        { numRuns: 60 },
      );
    } finally {
      await hostile.close();
      liar.close();
    }
  });
});
