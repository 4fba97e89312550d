import { WebSocket } from "ws";
import type { ErrorCode } from "../../shared/errors.ts";
import type { Logger } from "../../shared/log.ts";
import { encodeFrame, parseFrame } from "../../shared/protocol.ts";
import type { Frame, OutgoingFrame, RedirectFrame, Welcome } from "../../shared/protocol.ts";
import type { HardwareBackend } from "../hardware/backend.ts";
import { backoffDelay, jittered, sleep } from "./backoff.ts";
import type { BackoffOptions } from "./backoff.ts";
import { CommandDispatcher } from "./dispatcher.ts";
import { ConductorEndpoints, redirectAllowed } from "./endpoints.ts";
import { ConductorTrust } from "./tls-pin.ts";
import { SwarmChannel } from "./swarm-channel.ts";
import type { CommandTable } from "../commands/command.ts";

export interface AgentLinkOptions {
  /** ws:// or wss:// URL of the conductor's agent endpoint (…/v1/agent). */
  url: string;
  /** Other conductors' agent endpoints, tried in turn when the current one cannot be reached. */
  otherUrls?: readonly string[];
  backend: HardwareBackend;
  commands: CommandTable;
  logger: Logger;
  agentVersion: string;
  backoff?: Omit<BackoffOptions, "random">;
  /** Largest frame accepted from the conductor. */
  maxFrameBytes?: number;
  /** Called after each welcome (tests, the load generator). */
  onWelcome?: (welcome: Welcome) => void;
  /** A token kept from an earlier run of the agent in this same boot (see main's --token-file). */
  initialToken?: string;
  /** Told about each newly issued token, and about a rejected one (undefined), so main can keep it. */
  onTokenChange?: (token: string | undefined) => void;
  /** wss://: the certificate with this SHA-256 (anvil.ca_fingerprint) is the only trust anchor, not the system CAs. */
  pinnedFingerprint?: string;
  /** The agent's recent log lines, for collect_logs. */
  recentLog?: () => string;
}

/** Missed heartbeats before the agent gives up on a silent link and redials. */
const MISSED_HEARTBEATS = 3;
/** Redirects followed at once in a row; past this (conductors disagreeing on the owner) the backoff applies. */
const IMMEDIATE_REDIRECTS = 3;

interface SessionOutcome {
  welcomed: boolean;
  reason: string;
  /** A conductor named the node's owner: dial it next. */
  redirect?: RedirectFrame;
}

/**
 * The agent's side of the link: dial, hello (MACs, boot id, the token once issued), heartbeats with
 * jitter, redial with exponential backoff, commands handed to the dispatcher.
 */
export class AgentLink {
  private readonly dispatcher: CommandDispatcher;
  private readonly stopping = new AbortController();
  private socket: WebSocket | undefined;
  /** Set once the current socket has been welcomed; frames other than hello wait for it. */
  private welcomedSocket: WebSocket | undefined;
  private running: Promise<void> | undefined;
  /** Kept in memory only: a reboot forgets it, and the conductor then issues a new one for the new boot. */
  private token: string | undefined;
  private uuid: string | undefined;
  private readonly endpoints: ConductorEndpoints;
  private readonly trust: ConductorTrust;
  private readonly swarm: SwarmChannel;
  /** The local address of the current socket: the interface that reaches the conductor. */
  private localAddress: string | undefined;
  /** Whether the current socket is wss:// (its certificate verified before the upgrade). */
  private linkTls = false;

  constructor(private readonly options: AgentLinkOptions) {
    this.token = options.initialToken;
    this.swarm = new SwarmChannel(
      (frame) => this.send(frame),
      () => (this.welcomedSocket === undefined ? undefined : this.localAddress),
      () => this.welcomedSocket !== undefined && this.linkTls,
    );
    this.trust = new ConductorTrust(options.pinnedFingerprint);
    this.endpoints = new ConductorEndpoints([options.url, ...(options.otherUrls ?? [])]);
    this.dispatcher = new CommandDispatcher({
      backend: options.backend,
      commands: options.commands,
      logger: options.logger,
      send: (frame) => this.send(frame),
      swarm: this.swarm,
      ...(options.recentLog ? { recentLog: options.recentLog } : {}),
    });
  }

  get nodeUuid(): string | undefined {
    return this.uuid;
  }

  /** The conductor endpoint the agent dials next (the one it is connected to while connected). */
  get conductorUrl(): string {
    return this.endpoints.current();
  }

  get connected(): boolean {
    return this.welcomedSocket?.readyState === WebSocket.OPEN;
  }

  /** Starts the dial loop; it runs until stop(). */
  start(): void {
    this.running ??= this.loop();
  }

  async stop(): Promise<void> {
    this.stopping.abort();
    this.dispatcher.abortAll();
    this.socket?.close(1001, "agent stopping");
    await this.running;
  }

  private async loop(): Promise<void> {
    const backoff = this.options.backoff ?? { initialMs: 500, maxMs: 30_000 };
    let attempt = 0;
    let redirects = 0;
    let redirected = false;
    while (!this.stopping.signal.aborted) {
      const outcome = await this.session(redirected);
      if (this.stopping.signal.aborted) break;
      attempt = outcome.welcomed ? 1 : attempt + 1;
      redirected = outcome.redirect !== undefined && this.follow(outcome.redirect);
      redirects = redirected ? redirects + 1 : 0;
      if (!redirected) this.endpoints.advance();
      const delay = redirected && redirects <= IMMEDIATE_REDIRECTS ? 0 : backoffDelay(attempt, backoff);
      this.options.logger.info(
        { attempt, delay_ms: delay, reason: outcome.reason, next: this.endpoints.current() },
        "link down; redialling",
      );
      await sleep(delay, this.stopping.signal);
    }
  }

  /**
   * Takes a redirect's target as the next conductor to dial; false when it is refused: from wss:// (or with
   * a pinned certificate) only wss:// is followed, pinned or not, since the hello carries the token.
   */
  private follow(redirect: RedirectFrame): boolean {
    const from = this.endpoints.current();
    if (!redirectAllowed(from, redirect.url, this.options.pinnedFingerprint !== undefined)) {
      this.options.logger.warn({ url: redirect.url, from }, "redirect that would downgrade the link ignored");
      return false;
    }
    this.options.logger.info(
      { url: redirect.url, conductor: redirect.conductor },
      "redirected to the node's owner",
    );
    this.endpoints.redirectTo(redirect.url);
    return true;
  }

  /**
   * One connection, from dial to close. Resolves (never rejects) when the socket is gone. A wss:// conductor
   * whose certificate is refused never gets the upgrade request, let alone the hello.
   */
  private async session(redirected: boolean): Promise<SessionOutcome> {
    const url = this.endpoints.current();
    const secure = /^wss:/i.test(url);
    if (secure) {
      try {
        await this.trust.prepare(url, this.stopping.signal);
      } catch (error) {
        const reason = error instanceof Error ? error.message : String(error);
        if (!this.stopping.signal.aborted)
          this.options.logger.warn({ url, err: reason }, "conductor refused");
        return { welcomed: false, reason };
      }
    }
    return this.connect(url, secure, redirected);
  }

  private connect(url: string, secure: boolean, redirected: boolean): Promise<SessionOutcome> {
    const { logger } = this.options;
    return new Promise((resolve) => {
      let welcomed = false;
      let reason = "closed";
      let redirect: RedirectFrame | undefined;
      let lastHeard = Date.now();
      let heartbeatTimer: NodeJS.Timeout | undefined;
      let refusal: string | undefined;
      const onRefused = (error: Error): void => {
        refusal = error.message;
        logger.warn({ url, err: error.message }, "conductor refused");
      };
      const socket = new WebSocket(url, {
        handshakeTimeout: 10_000,
        maxPayload: this.options.maxFrameBytes ?? 16 * 1024 * 1024,
        // ws never follows HTTP redirects unless told to (followRedirects); say so rather than rely on it
        followRedirects: false,
        ...(secure ? { createConnection: this.trust.connector(onRefused) } : {}),
      });
      this.socket = socket;

      const beat = (intervalMs: number): void => {
        heartbeatTimer = setTimeout(() => {
          if (Date.now() - lastHeard > MISSED_HEARTBEATS * intervalMs) {
            reason = "conductor silent";
            socket.terminate();
            return;
          }
          this.send({ type: "heartbeat", ts: Date.now(), busy: this.dispatcher.busy });
          beat(intervalMs);
        }, jittered(intervalMs));
      };

      socket.on("upgrade", (response) => {
        this.localAddress = response.socket.localAddress;
        this.linkTls = secure;
      });
      socket.on("open", () => {
        void this.hello(socket, redirected);
      });
      socket.on("message", (data, isBinary) => {
        lastHeard = Date.now();
        if (isBinary) return;
        const parsed = parseFrame(data.toString(), this.options.maxFrameBytes ?? 16 * 1024 * 1024);
        if (!parsed.ok) {
          logger.warn({ code: parsed.error.code, err: parsed.error.message }, "bad frame from the conductor");
          return;
        }
        const frame = parsed.frame;
        if (frame.type === "welcome") {
          welcomed = true;
          this.welcomedSocket = socket;
          if (frame.token !== undefined) {
            this.token = frame.token;
            this.options.onTokenChange?.(frame.token);
          }
          this.uuid = frame.node_uuid;
          logger.info({ node: frame.node_uuid, fast_track: frame.fast_track }, "welcomed by the conductor");
          beat(frame.heartbeat_interval_ms);
          this.dispatcher.resendUnacked();
          this.options.onWelcome?.(frame);
          return;
        }
        if (frame.type === "redirect") {
          // before the welcome (a non-owner) or during a session (the node moved): the socket closes next
          redirect = frame;
          reason = "redirect";
          return;
        }
        if (frame.type === "error") {
          reason = frame.code;
          this.onRefusal(frame.code);
          logger.warn({ code: frame.code, err: frame.message }, "conductor reported a protocol error");
          return;
        }
        if (welcomed) this.dispatch(frame);
      });
      socket.on("error", (error) => {
        reason = refusal ?? error.message;
      });
      socket.on("close", () => {
        clearTimeout(heartbeatTimer);
        if (this.socket === socket) this.socket = undefined;
        if (this.welcomedSocket === socket) this.welcomedSocket = undefined;
        this.swarm.linkDown();
        resolve(redirect === undefined ? { welcomed, reason } : { welcomed, reason, redirect });
      });
    });
  }

  private async hello(socket: WebSocket, redirected: boolean): Promise<void> {
    const { backend } = this.options;
    try {
      const [macs, bmc, bootId] = await Promise.all([backend.macs(), backend.bmcAddress(), backend.bootId()]);
      if (socket.readyState !== WebSocket.OPEN) return;
      socket.send(
        encodeFrame({
          type: "hello",
          agent_version: this.options.agentVersion,
          macs,
          bmc_address: bmc,
          boot_id: bootId,
          ...(this.token === undefined ? {} : { token: this.token }),
          ...(redirected ? { redirected: true } : {}),
        }),
      );
    } catch (error) {
      this.options.logger.error({ err: (error as Error).message }, "cannot build hello");
      socket.terminate();
    }
  }

  /** A rejected token is worthless; dialling without it lets the conductor decide afresh. */
  private onRefusal(code: ErrorCode): void {
    if (code === "BAD_TOKEN" && this.token !== undefined) {
      this.token = undefined;
      this.options.onTokenChange?.(undefined);
    }
  }

  private dispatch(frame: Frame): void {
    switch (frame.type) {
      case "command":
        this.dispatcher.handleCommand(frame);
        return;
      case "cancel":
        this.dispatcher.handleCancel(frame.id);
        return;
      case "ack":
        this.dispatcher.handleAck(frame.id);
        return;
      case "swarm_reply":
        this.swarm.handleReply(frame);
        return;
      case "heartbeat":
      case "hello":
      case "welcome":
      case "progress":
      case "result":
      case "error":
      case "redirect":
      case "swarm_join":
      case "swarm_ask":
      case "swarm_have":
      case "swarm_drop":
      case "swarm_leave":
        return; // heartbeats only prove liveness; the rest is not the conductor's to send
    }
  }

  private send(frame: OutgoingFrame): boolean {
    const socket = this.welcomedSocket;
    if (socket?.readyState !== WebSocket.OPEN) return false;
    socket.send(encodeFrame(frame));
    return true;
  }
}
