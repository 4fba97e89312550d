import { createSocket } from "node:dgram";
import type { RemoteInfo, Socket } from "node:dgram";
import { lookup } from "node:dns/promises";
import { timingSafeEqual } from "node:crypto";
import { isIPv4 } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { IpmiCommandError } from "../ipmitool.ts";
import type { IpmiFailureKind } from "../ipmitool.ts";
import { decodeDatagram, encodeV15, encodeV20, peekSessionId, PayloadType, randomSlice } from "./packet.ts";
import type { SessionKeys, V15Packet, V20Packet } from "./packet.ts";
import {
  authCapabilitiesRequest,
  Command,
  NetFn,
  powerIsOn,
  request,
  responseTo,
  supportsIpmi20,
} from "./message.ts";
import {
  decodeOpenSessionResponse,
  decodeRakp2,
  decodeRakp4,
  encodeOpenSessionRequest,
  encodeRakp1,
  encodeRakp3,
  NAME_ONLY_LOOKUP,
  Privilege,
  rakp2AuthCode,
  rakp3AuthCode,
  rakp4Icv,
  sessionIntegrityKey,
  sessionKeys,
  statusText,
  SUITE_3,
  userKey,
} from "./rakp.ts";
import type { PrivilegeName, RakpExchange } from "./rakp.ts";

/** One BMC and the credentials to open a session on it. */
export interface RmcpTarget {
  host: string;
  port: number;
  username: string;
  password: string;
  privilege: PrivilegeName;
}

export interface RmcpClientOptions {
  /** Wait this long for each answer before sending the packet again (ipmitool's -N). Default 1000 ms. */
  packetTimeoutMs?: number;
  /** Times a packet is sent again before the BMC counts as silent (ipmitool's -R). Default 2. */
  packetRetries?: number;
  /** Whole status queries tried again after a transient failure, as the ipmitool runner does. Default 2. */
  retries?: number;
  /** Pause before such a retry. Default 500 ms. */
  retryDelayMs?: number;
  /**
   * Ask Get Channel Authentication Capabilities before every session, as ipmitool does. Default false: only
   * before a retry, where its answer turns a BMC without IPMI v2.0 into a clear error; a BMC that answered
   * before needs no asking each pass, and the round trip is a sixth of a query's datagrams.
   */
  alwaysProbe?: boolean;
  /** Told of every finished query (after its retries): metrics. `outcome` is "ok" or the failure kind. */
  onCall?: (call: { command: string; outcome: string; seconds: number }) => void;
}

type Packet = V20Packet | V15Packet;

/** The query waiting for its next answer: which packets are its, and where to deliver the first one. */
interface Conversation {
  consoleSessionId: number;
  address: string;
  port: number;
  keys?: SessionKeys;
  deliver?: (packet: Packet) => void;
}

class Failure extends Error {
  constructor(
    readonly kind: IpmiFailureKind,
    readonly detail: string,
  ) {
    super(detail);
  }
}

/**
 * IPMI v2.0 (RMCP+) power status without a child process: Get Channel Authentication Capabilities, Open
 * Session, RAKP 1-4 (cipher suite 3, as ipmitool's lanplus default), Get Chassis Status encrypted and signed,
 * Close Session. One UDP socket serves every BMC: answers are routed by the console session ID this client
 * chose (the header's once the session is open, the payload's during set-up) and, before a session exists,
 * by the BMC's address. Queries to one BMC run one at a time. Passwords never leave the process but as
 * HMAC keys.
 */
export class RmcpClient {
  /** Datagrams sent, and how many of them were resends after a silent packet timeout (benches, metrics). */
  readonly counters = { sent: 0, resent: 0 };
  private socket?: Promise<Socket>;
  private readonly bySession = new Map<number, Conversation>();
  private readonly byAddress = new Map<string, Conversation>();
  private readonly queues = new Map<string, Promise<void>>();
  private readonly packetTimeoutMs: number;
  private readonly packetRetries: number;
  private readonly retries: number;
  private readonly retryDelayMs: number;
  private readonly onCall: NonNullable<RmcpClientOptions["onCall"]>;
  private readonly alwaysProbe: boolean;

  constructor(options: RmcpClientOptions = {}) {
    this.packetTimeoutMs = options.packetTimeoutMs ?? 1000;
    this.packetRetries = options.packetRetries ?? 2;
    this.retries = options.retries ?? 2;
    this.retryDelayMs = options.retryDelayMs ?? 500;
    this.onCall = options.onCall ?? (() => undefined);
    this.alwaysProbe = options.alwaysProbe ?? false;
  }

  /**
   * Whether the BMC reports the system powered on.
   * @throws IpmiCommandError (kind "unreachable" or "timeout" is retryable, "auth" for credentials, "failed"
   * for a refused command); the signal's reason when aborted.
   */
  async powerIsOn(target: RmcpTarget, options: { signal?: AbortSignal } = {}): Promise<boolean> {
    const bmc = `${target.host}:${target.port}`;
    const began = performance.now();
    const report = (outcome: string): void =>
      this.onCall({ command: "chassis status", outcome, seconds: (performance.now() - began) / 1000 });
    for (let attempt = 0; ; attempt++) {
      try {
        const probe = this.alwaysProbe || attempt > 0;
        const on = await this.oneAtATime(bmc, () => this.query(target, { signal: options.signal, probe }));
        report("ok");
        return on;
      } catch (error) {
        if (!(error instanceof Failure)) throw error;
        const failure = new IpmiCommandError(
          `RMCP+ chassis status to ${bmc} failed: ${error.detail}`,
          error.kind,
        );
        if (!failure.retryable || attempt >= this.retries) {
          report(failure.kind);
          throw failure;
        }
        await sleep(this.retryDelayMs, undefined, { signal: options.signal });
      }
    }
  }

  /** Closes the socket; queries in flight fail as unanswered. */
  async close(): Promise<void> {
    const socket = this.socket;
    this.socket = undefined;
    if (socket) (await socket).close();
  }

  private async oneAtATime<T>(bmc: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.queues.get(bmc);
    if (previous === undefined) {
      // the usual case, a BMC no one is talking to: no queue to wait in
      let release = (): void => undefined;
      const mine = new Promise<void>((resolve) => (release = resolve));
      this.queues.set(bmc, mine);
      try {
        return await fn();
      } finally {
        release();
        if (this.queues.get(bmc) === mine) this.queues.delete(bmc);
      }
    }
    let release = (): void => undefined;
    const mine = new Promise<void>((resolve) => (release = resolve));
    const tail = previous.then(() => mine);
    this.queues.set(bmc, tail);
    try {
      await previous;
      return await fn();
    } finally {
      release();
      // the last in line forgets the BMC, so 10^5 BMCs leave no 10^5 entries behind
      if (this.queues.get(bmc) === tail) this.queues.delete(bmc);
    }
  }

  private bound(): Promise<Socket> {
    this.socket ??= new Promise((resolve, reject) => {
      const socket = createSocket({ type: "udp4", recvBufferSize: 4 * 1024 * 1024 });
      socket.on("message", (datagram, remote) => this.route(datagram, remote));
      socket.once("error", reject);
      socket.bind(0, () => {
        socket.unref(); // pending queries hold the process through their timers, not the socket
        resolve(socket);
      });
    });
    return this.socket;
  }

  /** Hands a datagram to the query it answers; anything else is dropped. Never throws. */
  private route(datagram: Buffer, remote: RemoteInfo): void {
    const sessionId = peekSessionId(datagram);
    let conversation: Conversation | undefined;
    if (sessionId === null) {
      conversation = this.byAddress.get(`${remote.address}:${remote.port}`);
    } else if (sessionId !== 0) {
      conversation = this.bySession.get(sessionId);
    } else if (datagram.length >= 24) {
      // set-up payloads (Open Session Response, RAKP 2 and 4) name the console's session at offset 4
      conversation = this.bySession.get(datagram.readUInt32LE(16 + 4));
    }
    if (!conversation?.deliver) return;
    if (remote.address !== conversation.address || remote.port !== conversation.port) return;
    const packet = decodeDatagram(datagram, conversation.keys);
    if (packet !== null) conversation.deliver(packet);
  }

  /**
   * Sends `datagram` and resolves with the first answer `accept` turns into a value, sending again after
   * each silent `packetTimeoutMs`. @throws Failure "unreachable" when every try goes unanswered
   */
  private async roundTrip<T>(
    conversation: Conversation,
    exchange: { datagram: Buffer; what: string; retries?: number; signal?: AbortSignal },
    accept: (packet: Packet) => T | null,
  ): Promise<T> {
    const socket = await this.bound();
    const { signal } = exchange;
    signal?.throwIfAborted();
    return new Promise<T>((resolve, reject) => {
      let sent = 0;
      let timer: NodeJS.Timeout | undefined;
      const finish = (): void => {
        clearTimeout(timer);
        conversation.deliver = undefined;
        signal?.removeEventListener("abort", onAbort);
      };
      const onAbort = (): void => {
        finish();
        reject(signal?.reason);
      };
      const send = (): void => {
        if (sent > (exchange.retries ?? this.packetRetries)) {
          finish();
          reject(new Failure("unreachable", `the BMC did not answer (${exchange.what})`));
          return;
        }
        if (sent > 0) this.counters.resent++;
        sent++;
        this.counters.sent++;
        socket.send(exchange.datagram, conversation.port, conversation.address);
        timer = setTimeout(send, this.packetTimeoutMs);
      };
      conversation.deliver = (packet) => {
        const value = accept(packet);
        if (value === null) return;
        finish();
        resolve(value);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      send();
    });
  }

  private async query(
    target: RmcpTarget,
    options: { signal: AbortSignal | undefined; probe: boolean },
  ): Promise<boolean> {
    const { signal, probe } = options;
    const address = isIPv4(target.host) ? target.host : (await lookup(target.host, { family: 4 })).address;
    const conversation: Conversation = { consoleSessionId: this.newSessionId(), address, port: target.port };
    const addressKey = `${address}:${target.port}`;
    this.bySession.set(conversation.consoleSessionId, conversation);
    try {
      if (probe) await this.probe(conversation, { target, addressKey, signal });
      return await this.converse(conversation, { target, signal });
    } finally {
      this.bySession.delete(conversation.consoleSessionId);
      if (this.byAddress.get(addressKey) === conversation) this.byAddress.delete(addressKey);
    }
  }

  private newSessionId(): number {
    for (;;) {
      const id = randomSlice(4).readUInt32LE(0);
      if (id !== 0 && !this.bySession.has(id)) return id;
    }
  }

  /** Get Channel Authentication Capabilities, outside any session (IPMI v1.5 framing, as ipmitool). */
  private async probe(
    conversation: Conversation,
    context: { target: RmcpTarget; addressKey: string; signal: AbortSignal | undefined },
  ): Promise<void> {
    const { target, addressKey, signal } = context;
    this.byAddress.set(addressKey, conversation);
    const capabilities = { netFn: NetFn.app, cmd: Command.getChannelAuthCapabilities, seq: 1 };
    const caps = await this.roundTrip(
      conversation,
      {
        datagram: encodeV15(authCapabilitiesRequest(1, Privilege[target.privilege])),
        what: "authentication capabilities",
        signal,
      },
      (packet) => (packet.format === "v1.5" ? responseTo(packet.payload, capabilities) : null),
    );
    this.byAddress.delete(addressKey);
    if (caps.completionCode !== 0 || !supportsIpmi20(caps.data)) {
      throw new Failure("failed", "the BMC does not offer IPMI v2.0 (RMCP+) on this channel");
    }
  }

  private async converse(
    conversation: Conversation,
    context: { target: RmcpTarget; signal: AbortSignal | undefined },
  ): Promise<boolean> {
    const { target, signal } = context;
    const privilege = Privilege[target.privilege];
    const x = await this.openSession(conversation, { target, privilege, signal });
    conversation.keys = x.keys;
    let sequence = 1;
    const inSession = (payload: Buffer): Buffer =>
      encodeV20(
        { payloadType: PayloadType.ipmi, sessionId: x.bmcSessionId, sequence: sequence++, payload },
        x.keys,
      );
    const ipmiAnswer = (expected: { netFn: number; cmd: number; seq: number }) => (packet: Packet) =>
      packet.format === "v2.0" && packet.payloadType === PayloadType.ipmi && packet.authenticated
        ? responseTo(packet.payload, expected)
        : null;
    // 5. Get Chassis Status
    const chassis = { netFn: NetFn.chassis, cmd: Command.getChassisStatus, seq: 2 };
    let on: boolean | null;
    try {
      const status = await this.roundTrip(
        conversation,
        { datagram: inSession(request(chassis)), what: "chassis status", signal },
        ipmiAnswer(chassis),
      );
      if (status.completionCode !== 0) {
        throw new Failure(
          "failed",
          `Get Chassis Status completion code 0x${status.completionCode.toString(16)}`,
        );
      }
      on = powerIsOn(status.data);
    } finally {
      // 6. Close Session, whatever the status did: a BMC has few session slots. Sent once and not waited
      // for: its answer changes nothing, and a lost one leaves the session to the BMC's idle timeout, as an
      // unanswered close from ipmitool does.
      const data = Buffer.alloc(4);
      data.writeUInt32LE(x.bmcSessionId, 0);
      const close = request({ netFn: NetFn.app, cmd: Command.closeSession, seq: 3, data });
      (await this.bound()).send(inSession(close), conversation.port, conversation.address);
    }
    if (on === null) throw new Failure("failed", "Get Chassis Status answer too short");
    return on;
  }

  /** Open Session and RAKP 1-4. @throws Failure ("auth" for refused or wrong credentials) */
  private async openSession(
    conversation: Conversation,
    context: { target: RmcpTarget; privilege: number; signal: AbortSignal | undefined },
  ): Promise<RakpExchange & { keys: SessionKeys }> {
    const { target, privilege, signal } = context;
    const consoleSessionId = conversation.consoleSessionId;
    const kuid = userKey(target.password);
    if (kuid === null) throw new Failure("auth", "password longer than 20 bytes (IPMI v2.0's limit)");
    const username = Buffer.from(target.username, "utf8");
    if (username.length > 16) throw new Failure("auth", "user name longer than 16 bytes");
    const setUp = (payloadType: number, payload: Buffer): Buffer =>
      encodeV20({ payloadType, sessionId: 0, sequence: 0, payload });
    const answer =
      <T extends { tag: number; consoleSessionId: number }>(
        type: number,
        decode: (b: Buffer) => T | null,
        tag: number,
      ) =>
      (packet: Packet): T | null => {
        if (packet.format !== "v2.0" || packet.payloadType !== type) return null;
        const message = decode(packet.payload);
        return message && message.tag === tag && message.consoleSessionId === consoleSessionId
          ? message
          : null;
      };
    // 2. Open Session
    const opened = await this.roundTrip(
      conversation,
      {
        datagram: setUp(
          PayloadType.openSessionRequest,
          encodeOpenSessionRequest({ tag: 1, privilege, consoleSessionId, ...SUITE_3 }),
        ),
        what: "open session",
        signal,
      },
      answer(PayloadType.openSessionResponse, decodeOpenSessionResponse, 1),
    );
    if (opened.status !== 0) {
      // "insufficient resources": every session slot is taken; another try later may find one free
      const kind = opened.status === 0x01 ? "unreachable" : "auth";
      throw new Failure(kind, `the BMC refused the session: ${statusText(opened.status)}`);
    }
    // 3. RAKP 1 → 2
    const role = privilege | NAME_ONLY_LOOKUP;
    const consoleRandom = randomSlice(16);
    const bmcSessionId = opened.bmcSessionId;
    const rakp2 = await this.roundTrip(
      conversation,
      {
        datagram: setUp(
          PayloadType.rakp1,
          encodeRakp1({ tag: 2, bmcSessionId, consoleRandom, role, username }),
        ),
        what: "RAKP 1",
        signal,
      },
      answer(PayloadType.rakp2, decodeRakp2, 2),
    );
    if (rakp2.status !== 0) {
      const hint = rakp2.status === 0x0d ? "unknown user name" : "the BMC refused the session";
      throw new Failure("auth", `${hint} (RAKP 2: ${statusText(rakp2.status)})`);
    }
    const x: RakpExchange = {
      consoleSessionId,
      bmcSessionId,
      consoleRandom,
      bmcRandom: rakp2.bmcRandom,
      bmcGuid: rakp2.bmcGuid,
      role,
      username,
    };
    if (!timingSafeEqual(rakp2AuthCode(kuid, x), rakp2.authCode)) {
      throw new Failure("auth", "wrong password (RAKP 2 HMAC is invalid)");
    }
    // 4. RAKP 3 → 4
    const rakp4 = await this.roundTrip(
      conversation,
      {
        datagram: setUp(
          PayloadType.rakp3,
          encodeRakp3({ tag: 3, status: 0, bmcSessionId, authCode: rakp3AuthCode(kuid, x) }),
        ),
        what: "RAKP 3",
        signal,
      },
      answer(PayloadType.rakp4, decodeRakp4, 3),
    );
    // NOTE: the password was proven by RAKP 2's code already; a refusal here is most often a resent RAKP 1
    // the BMC answered with a new random number after our RAKP 3 was built on the first: worth another try
    if (rakp4.status !== 0) {
      throw new Failure("unreachable", `the BMC refused the session (RAKP 4: ${statusText(rakp4.status)})`);
    }
    // NOTE: Kg, the BMC key, is Kuid on BMCs without one (ipmitool's -k unset); a BMC key is not supported
    const sik = sessionIntegrityKey(kuid, x);
    if (!timingSafeEqual(rakp4Icv(sik, x), rakp4.icv)) {
      throw new Failure("auth", "RAKP 4 integrity check value is invalid (a BMC key set?)");
    }
    return { ...x, keys: sessionKeys(sik) };
  }
}
