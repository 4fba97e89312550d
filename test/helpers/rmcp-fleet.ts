// A stand-in fleet of IPMI v2.0 BMCs served from one process: each BMC its own UDP socket on its own
// loopback address (127.x.y.z), its own chassis power, GUID and sessions, answering RMCP+ with cipher suite 3
// as a BMC does. Nothing real runs 10^5 BMCs; this stands in for them in the power status bench, and is
// checked against the real client (ipmitool) in a test. Built on the conductor's own codec, so the test
// against ipmitool checks both sides.
import { createSocket } from "node:dgram";
import type { RemoteInfo, Socket } from "node:dgram";
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import {
  BMC_ADDRESS,
  Command,
  decodeLanMessage,
  encodeLanMessage,
  NetFn,
} from "../../conductor/drivers/ipmi/rmcp/message.ts";
import {
  decodeDatagram,
  encodeV15,
  encodeV20,
  PayloadType,
} from "../../conductor/drivers/ipmi/rmcp/packet.ts";
import type { SessionKeys } from "../../conductor/drivers/ipmi/rmcp/packet.ts";
import {
  decodeOpenSessionRequest,
  decodeRakp1,
  decodeRakp3,
  encodeOpenSessionResponse,
  encodeRakp2,
  encodeRakp4,
  rakp2AuthCode,
  rakp3AuthCode,
  rakp4Icv,
  sessionIntegrityKey,
  sessionKeys,
  SUITE_3,
} from "../../conductor/drivers/ipmi/rmcp/rakp.ts";
import type { RakpExchange } from "../../conductor/drivers/ipmi/rmcp/rakp.ts";

/** Sessions one BMC holds at once (real ones hold 4 to 32); past it, Open Session says "no resources". */
const MAX_SESSIONS = 16;
/** A session idle this long is dropped (IPMI's default session inactivity timeout is 60 s). */
const SESSION_IDLE_MS = 60_000;

interface Session {
  consoleSessionId: number;
  privilege: number;
  exchange?: RakpExchange;
  /** The RAKP 2 sent, sent again to a repeated RAKP 1 (the console resent it: our answer was late or lost). */
  rakp2?: Buffer;
  /** The RAKP 4 sent, likewise for a repeated RAKP 3. */
  rakp4?: Buffer;
  keys?: SessionKeys;
  outSequence: number;
  lastUsed: number;
}

export interface FleetOptions {
  /** BMCs to serve. */
  count: number;
  /** Index of the first BMC: its address is 127.100.0.1 + index (several processes share one numbering). */
  first?: number;
  /** UDP port every BMC listens on (each has its own address). Default 623, IPMI's port. */
  port?: number;
  username: string;
  password: string;
  /** Initial power of BMC `index`. Default: on. */
  powerOf?: (index: number) => boolean;
}

/** The loopback address of fleet BMC `index`: 127.100.0.1 + index, so 10^6 fit under 127.115. */
export function fleetAddress(index: number): string {
  const n = 0x7f640001 + index;
  return `${n >>> 24}.${(n >>> 16) & 0xff}.${(n >>> 8) & 0xff}.${n & 0xff}`;
}

class StandInBmc {
  readonly sessions = new Map<number, Session>();
  private nextSessionId = 1;
  readonly guid: Buffer;

  constructor(
    readonly socket: Socket,
    readonly index: number,
    public power: boolean,
  ) {
    this.guid = createHash("md5").update(`anvil-stand-in-bmc-${index}`).digest();
  }

  openSession(consoleSessionId: number, privilege: number, now: number): number | null {
    if (this.sessions.size >= MAX_SESSIONS) {
      for (const [id, session] of this.sessions)
        if (now - session.lastUsed > SESSION_IDLE_MS) this.sessions.delete(id);
      if (this.sessions.size >= MAX_SESSIONS) return null;
    }
    const id = this.nextSessionId;
    this.nextSessionId = (this.nextSessionId % 0xfffffffe) + 1;
    this.sessions.set(id, { consoleSessionId, privilege, outSequence: 1, lastUsed: now });
    return id;
  }
}

/** A running fleet: the BMCs' addresses and their power, and a stop. */
export class RmcpBmcFleet {
  private constructor(
    private readonly bmcs: StandInBmc[],
    private readonly options: Required<Omit<FleetOptions, "powerOf">>,
  ) {}

  /** Binds every BMC's socket; resolves once all listen. @throws the bind error (address in use, no fds) */
  static async start(options: FleetOptions): Promise<RmcpBmcFleet> {
    const resolved = { first: 0, port: 623, ...options };
    const bmcs: StandInBmc[] = [];
    const fleet = new RmcpBmcFleet(bmcs, resolved);
    try {
      for (let i = 0; i < options.count; i++) {
        const index = resolved.first + i;
        const socket = createSocket({ type: "udp4" });
        const bmc = new StandInBmc(socket, index, options.powerOf?.(index) ?? true);
        bmcs.push(bmc);
        socket.on("message", (datagram, remote) => fleet.answer(bmc, datagram, remote));
        await new Promise<void>((resolve, reject) => {
          socket.once("error", reject);
          socket.bind(resolved.port, fleetAddress(index), () => {
            socket.off("error", reject);
            resolve();
          });
        });
      }
    } catch (error) {
      await fleet.stop();
      throw error;
    }
    return fleet;
  }

  get port(): number {
    return this.options.port;
  }

  /** host and port of each BMC, in index order. */
  targets(): { host: string; port: number; index: number }[] {
    return this.bmcs.map((bmc) => ({
      host: fleetAddress(bmc.index),
      port: this.options.port,
      index: bmc.index,
    }));
  }

  power(index: number): boolean {
    return this.bmc(index).power;
  }

  setPower(index: number, on: boolean): void {
    this.bmc(index).power = on;
  }

  /** Sessions open on BMC `index` (a client that forgets Close Session leaves them). */
  openSessions(index: number): number {
    return this.bmc(index).sessions.size;
  }

  async stop(): Promise<void> {
    await Promise.all(
      this.bmcs.map((bmc) =>
        new Promise<void>((resolve) => bmc.socket.close(() => resolve())).catch(() => undefined),
      ),
    );
  }

  private bmc(index: number): StandInBmc {
    const bmc = this.bmcs[index - this.options.first];
    if (!bmc) throw new Error(`no BMC ${index} in this fleet`);
    return bmc;
  }

  /** Answers one datagram as a BMC would; anything malformed is dropped, as a BMC drops it. */
  private answer(bmc: StandInBmc, datagram: Buffer, remote: RemoteInfo): void {
    const reply = (bytes: Buffer): void => bmc.socket.send(bytes, remote.port, remote.address);
    const header = datagram.length >= 10 && datagram[4] === 0x06 ? datagram.readUInt32LE(6) : 0;
    const session = header === 0 ? undefined : bmc.sessions.get(header);
    const packet = decodeDatagram(datagram, session?.keys);
    if (packet === null) return;
    if (packet.format === "v1.5") {
      const message = decodeLanMessage(packet.payload);
      if (message?.netFn === NetFn.app && message.cmd === Command.getChannelAuthCapabilities) {
        // channel 1; v2.0 extended data + none, MD5, straight password; per-message auth on; v1.5 and v2.0
        const data = Buffer.from([0x00, 0x01, 0x95, 0x04, 0x03, 0, 0, 0, 0]);
        reply(encodeV15(this.response(message, data)));
      }
      return;
    }
    const now = Date.now();
    switch (packet.payloadType) {
      case PayloadType.openSessionRequest: {
        const request = decodeOpenSessionRequest(packet.payload);
        if (request === null) return;
        const suite3 =
          request.authentication === SUITE_3.authentication &&
          request.integrity === SUITE_3.integrity &&
          request.confidentiality === SUITE_3.confidentiality;
        const privilege = request.privilege === 0 ? 4 : request.privilege;
        const id = suite3 ? bmc.openSession(request.consoleSessionId, privilege, now) : null;
        const status = !suite3 ? 0x11 : id === null ? 0x01 : 0;
        const response = { ...request, status, privilege, bmcSessionId: id ?? 0 };
        reply(
          encodeV20({
            payloadType: PayloadType.openSessionResponse,
            sessionId: 0,
            sequence: 0,
            payload: encodeOpenSessionResponse(response),
          }),
        );
        return;
      }
      case PayloadType.rakp1: {
        const rakp1 = decodeRakp1(packet.payload);
        const pending = rakp1 ? bmc.sessions.get(rakp1.bmcSessionId) : undefined;
        if (!rakp1 || !pending || pending.keys) return;
        if (pending.exchange && pending.rakp2 && pending.exchange.consoleRandom.equals(rakp1.consoleRandom)) {
          reply(pending.rakp2);
          return;
        }
        const base = { tag: rakp1.tag, consoleSessionId: pending.consoleSessionId };
        const empty = Buffer.alloc(0);
        if (rakp1.username.toString("utf8") !== this.options.username || (rakp1.role & 0x0f) > 4) {
          bmc.sessions.delete(rakp1.bmcSessionId);
          const status = (rakp1.role & 0x0f) > 4 ? 0x09 : 0x0d;
          reply(
            this.setUp(
              PayloadType.rakp2,
              encodeRakp2({ ...base, status, bmcRandom: empty, bmcGuid: empty, authCode: empty }),
            ),
          );
          return;
        }
        const exchange: RakpExchange = {
          consoleSessionId: pending.consoleSessionId,
          bmcSessionId: rakp1.bmcSessionId,
          consoleRandom: Buffer.from(rakp1.consoleRandom),
          bmcRandom: randomBytes(16),
          bmcGuid: bmc.guid,
          role: rakp1.role,
          username: Buffer.from(rakp1.username),
        };
        pending.exchange = exchange;
        pending.lastUsed = now;
        const authCode = rakp2AuthCode(this.kuid(), exchange);
        pending.rakp2 = this.setUp(
          PayloadType.rakp2,
          encodeRakp2({ ...base, status: 0, bmcRandom: exchange.bmcRandom, bmcGuid: bmc.guid, authCode }),
        );
        reply(pending.rakp2);
        return;
      }
      case PayloadType.rakp3: {
        const rakp3 = decodeRakp3(packet.payload);
        const pending = rakp3 ? bmc.sessions.get(rakp3.bmcSessionId) : undefined;
        if (!rakp3 || !pending?.exchange) return;
        if (pending.keys) {
          if (pending.rakp4) reply(pending.rakp4);
          return;
        }
        const base = { tag: rakp3.tag, consoleSessionId: pending.consoleSessionId };
        const expected = rakp3AuthCode(this.kuid(), pending.exchange);
        if (
          rakp3.status !== 0 ||
          rakp3.authCode.length !== 20 ||
          !timingSafeEqual(expected, rakp3.authCode)
        ) {
          bmc.sessions.delete(rakp3.bmcSessionId);
          if (rakp3.status === 0)
            reply(
              this.setUp(PayloadType.rakp4, encodeRakp4({ ...base, status: 0x0f, icv: Buffer.alloc(0) })),
            );
          return;
        }
        const sik = sessionIntegrityKey(this.kuid(), pending.exchange);
        pending.keys = sessionKeys(sik);
        pending.lastUsed = now;
        pending.rakp4 = this.setUp(
          PayloadType.rakp4,
          encodeRakp4({ ...base, status: 0, icv: rakp4Icv(sik, pending.exchange) }),
        );
        reply(pending.rakp4);
        return;
      }
      case PayloadType.ipmi: {
        if (!session?.keys || !packet.authenticated || !packet.encrypted) return;
        const message = decodeLanMessage(packet.payload);
        if (message === null || message.to !== BMC_ADDRESS) return;
        session.lastUsed = now;
        const data = this.command(bmc, {
          session,
          sessionId: header,
          netFn: message.netFn,
          cmd: message.cmd,
          data: message.data,
        });
        reply(
          encodeV20(
            {
              payloadType: PayloadType.ipmi,
              sessionId: session.consoleSessionId,
              sequence: session.outSequence++,
              payload: this.response(message, data),
            },
            session.keys,
          ),
        );
        return;
      }
      default:
        return;
    }
  }

  /** The answer's data (completion code first) to one command inside a session. */
  private command(
    bmc: StandInBmc,
    request: { session: Session; sessionId: number; netFn: number; cmd: number; data: Buffer },
  ): Buffer {
    const { netFn, cmd, data } = request;
    if (netFn === NetFn.chassis && cmd === Command.getChassisStatus) {
      // power on/off, no fault; last power event none; misc chassis state; front panel
      return Buffer.from([0x00, bmc.power ? 0x01 : 0x00, 0x00, 0x00, 0x00]);
    }
    if (netFn === NetFn.chassis && cmd === Command.chassisControl && data.length >= 1) {
      const control = (data[0] as number) & 0x0f;
      if (control === 0x00 || control === 0x05) bmc.power = false;
      else if (control === 0x01 || control === 0x02 || control === 0x03) bmc.power = true;
      else return Buffer.from([0xcc]);
      return Buffer.from([0x00]);
    }
    if (netFn === NetFn.app && cmd === Command.setSessionPrivilegeLevel && data.length >= 1) {
      const wanted = (data[0] as number) & 0x0f;
      if (wanted > request.session.privilege) return Buffer.from([0x81]); // above the session's maximum
      return Buffer.from([0x00, wanted === 0 ? request.session.privilege : wanted]);
    }
    if (netFn === NetFn.app && cmd === Command.closeSession && data.length >= 4) {
      const id = data.readUInt32LE(0);
      if (!bmc.sessions.delete(id)) return Buffer.from([0x87]); // invalid session ID
      return Buffer.from([0x00]);
    }
    return Buffer.from([0xc1]); // invalid command
  }

  private response(request: { from: number; netFn: number; seq: number; cmd: number }, data: Buffer): Buffer {
    return encodeLanMessage({
      to: request.from,
      netFn: request.netFn + 1,
      from: BMC_ADDRESS,
      seq: request.seq,
      cmd: request.cmd,
      data,
    });
  }

  private setUp(payloadType: number, payload: Buffer): Buffer {
    return encodeV20({ payloadType, sessionId: 0, sequence: 0, payload });
  }

  private kuid(): Buffer {
    return Buffer.from(this.options.password, "utf8");
  }
}
