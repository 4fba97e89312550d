import { randomUUID } from "node:crypto";
import type { IncomingMessage, Server } from "node:http";
import type { Duplex } from "node:stream";
import type { TLSSocket } from "node:tls";
import { WebSocket, WebSocketServer } from "ws";
import { defaultConfig } from "../config.ts";
import type { ErrorCode } from "../../shared/errors.ts";
import type { Logger } from "../../shared/log.ts";
import { COMMAND_NAMES, encodeFrame, parseCommandArgs, parseFrame } from "../../shared/protocol.ts";
import type { CommandName, Frame, Hello, OutgoingFrame, Progress } from "../../shared/protocol.ts";
import { AgentCommandError, AgentRebooted } from "./command-error.ts";
import type { AgentDirectory } from "./directory.ts";
import { watchBytes } from "./byte-budget.ts";
import { ConnectionCaps } from "./connection-caps.ts";
import { FrameRate } from "./frame-rate.ts";
import { authenticateHello, type AgentOwner, type OwnerElsewhere } from "./handshake.ts";
import { KeyedMutex } from "./keyed-mutex.ts";
import { PendingCalls } from "./pending-calls.ts";
import { UnclaimedResults } from "./unclaimed-results.ts";
import { answerUpgrade, type UpgradeRoute } from "./upgrade-answer.ts";
import { handleSwarmFrame } from "./swarm-frames.ts";
import type { SwarmTracker } from "./swarm-tracker.ts";

export const AGENT_PATH = "/v1/agent";

export interface AgentGatewayOptions {
  directory: AgentDirectory;
  logger: Logger;
  /** Largest frame accepted from a welcomed agent (UTF-8 bytes). Default: the configuration's. */
  maxFrameBytes?: number;
  /** A session silent this long is dropped. Default 30 s; agents are told to beat three times as often. */
  heartbeatTimeoutMs?: number;
  /** A connection must say hello within this time. Default 10 s. */
  helloTimeoutMs?: number;
  /** Raw bytes a connection may send before its welcome (the hello included). Default 64 KiB. */
  maxBytesBeforeHello?: number;
  /** Agent connections in total (503 beyond) and from one source address (429 beyond). */
  maxConnections?: number;
  maxConnectionsPerSource?: number;
  /** Average frames per second per connection; bursts of ten times that pass. */
  maxFramesPerSecond?: number;
  /** In a cluster: the owner of a node when it is another conductor; its agent is redirected there. */
  ownerElsewhere?: OwnerElsewhere;
  /** Swarm deploys' tracker; unset, agents asking for a swarm are told it is off. */
  swarm?: SwarmTracker;
}

export interface CallOptions {
  signal?: AbortSignal;
  onProgress?: (progress: Progress) => void;
  /** Gives up (and cancels the command on the agent) after this long. Default: no limit. */
  timeoutMs?: number;
  /**
   * The command's id, when the caller keeps it (a step records it before asking): asking again with the same
   * id re-attaches to the command instead of running it twice. A result that already arrived for it (the agent
   * re-sends unacknowledged results after every welcome) settles the call at once. Default: a fresh id.
   */
  id?: string;
  /**
   * The arguments to send when the command goes out again after a reconnect. The agent ignores an id it
   * is running, but a new process of the same boot (its token kept in --token-file) runs it afresh, and
   * may then start from what the call learnt since (write_image's latest checkpoint). Checked as the first.
   */
  resendArgs?: () => unknown;
}

export type ConnectedListener = (uuid: string, hello: Hello) => void;
export type DisconnectedListener = (uuid: string) => void;
export type RebootedListener = (uuid: string, bootId: string) => void;

export interface AgentGateway {
  /**
   * Owns the server's WebSocket upgrades: the agent path becomes a session (within the connection caps);
   * a path one of `others` claims goes to it; any other path, or a refused one, gets an HTTP answer and its
   * socket is destroyed.
   */
  attach(server: Server, others?: readonly UpgradeRoute[]): void;
  /**
   * Runs a command on a node's agent.
   * @throws AgentCommandError: the agent's error (BUSY, BAD_ARGS, COMMAND_FAILED, …) or NOT_CONNECTED,
   * TIMEOUT, CANCELLED, GATEWAY_CLOSED.
   */
  call(
    nodeUuid: string,
    command: { name: CommandName; args?: unknown },
    options?: CallOptions,
  ): Promise<unknown>;
  isConnected(uuid: string): boolean;
  /** The address a live session's agent dialled from, without an IPv4-mapped prefix. */
  addressOf(uuid: string): string | undefined;
  onConnected(listener: ConnectedListener): void;
  onDisconnected(listener: DisconnectedListener): void;
  /**
   * A tokenless hello from a new boot of a node whose agent has no session and no command waiting here: the
   * node rebooted while no conductor was waiting on its agent's command (one a restart or a takeover handed
   * back to the agent). Commands waiting here fail with AGENT_REBOOTED instead.
   */
  onRebooted(listener: RebootedListener): void;
  /**
   * Cuts the node's live session at once (a power action ended the boot its agent ran in); a heartbeat timeout
   * would take up to heartbeatTimeoutMs, during which fast track would send work to a dead agent. False when
   * the node has no session here.
   */
  retire(uuid: string): boolean;
  /** Nodes whose agent has a live session here. */
  sessionNodes(): string[];
  /**
   * Sends a live session's agent to another conductor (its node moved there) and closes the session; the
   * agent keeps its token and unacknowledged results. False when the node has no session here.
   */
  redirect(uuid: string, owner: AgentOwner): boolean;
  /** Counts for tests and the soak: open connections, and those not yet welcomed. */
  stats(): { connections: number; unwelcomed: number };
  /** Closes every agent connection and rejects pending calls with GATEWAY_CLOSED. */
  close(): Promise<void>;
}

interface Connection {
  socket: WebSocket;
  /** "closing": refused; nothing it sends is looked at any more. */
  state: "new" | "authenticating" | "live" | "closing";
  lastSeen: number;
  openedAt: number;
  uuid?: string;
  remote: string;
  /** The agent's source address (its provisioning address, as far as we can tell). */
  address: string;
  /** The agent dialled over TLS (this server's own; a TLS-terminating proxy in front does not count). */
  tls: boolean;
  rate: FrameRate;
  /** Stops counting raw bytes once the connection is welcomed. */
  stopBudget: () => void;
}

/** Close codes: 1008 policy violation (refusals), 1009 message too big, 1001 going away. */
const CLOSE_POLICY = 1008;
const CLOSE_TOO_BIG = 1009;
const CLOSE_GOING_AWAY = 1001;
/** Normal closure: a redirected agent did nothing wrong. */
const CLOSE_NORMAL = 1000;
/** A refused peer that keeps sending is paused, and cut this long after its close frame. */
const REFUSED_GRACE_MS = 1_000;
/** How long a refused peer has to answer our close frame before its socket is destroyed (ws waits 30 s). */
const CLOSE_TIMEOUT_MS = 5_000;

/** Creates the conductor's agent endpoint: authenticates agents, keeps one session per node, runs commands. */
export function createAgentGateway(options: AgentGatewayOptions): AgentGateway {
  const { directory } = options;
  const logger = options.logger.child({ component: "agent-gateway" });
  const defaults = defaultConfig().agent;
  const maxFrameBytes = options.maxFrameBytes ?? defaults.maxFrameBytes;
  const heartbeatTimeoutMs = options.heartbeatTimeoutMs ?? defaults.heartbeatTimeoutS * 1000;
  const heartbeatIntervalMs = Math.max(100, Math.floor(heartbeatTimeoutMs / 3));
  const helloTimeoutMs = options.helloTimeoutMs ?? defaults.helloTimeoutS * 1000;
  const maxBytesBeforeHello = options.maxBytesBeforeHello ?? defaults.maxBytesBeforeHello;
  const framesPerSecond = options.maxFramesPerSecond ?? defaults.maxFramesPerSecond;
  const caps = new ConnectionCaps({
    maxConnections: options.maxConnections ?? defaults.maxConnections,
    maxConnectionsPerSource: options.maxConnectionsPerSource ?? defaults.maxConnectionsPerSource,
  });

  // Twice the frame limit: frames in between get a FRAME_TOO_LARGE answer; ws cuts anything bigger unread.
  // Before the welcome the raw byte budget (watchBytes) is the bound, far below this.
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: maxFrameBytes * 2,
    perMessageDeflate: false,
  });
  const connections = new Set<Connection>();
  const sessions = new Map<string, Connection>();
  const pending = new PendingCalls();
  const unclaimed = new UnclaimedResults();
  const tokenLocks = new KeyedMutex();
  const connectedListeners: ConnectedListener[] = [];
  const disconnectedListeners: DisconnectedListener[] = [];
  const rebootedListeners: RebootedListener[] = [];
  const attached: Array<{
    server: Server;
    listener: (req: IncomingMessage, socket: Duplex, head: Buffer) => void;
  }> = [];
  let closed = false;

  const sweep = setInterval(
    () => {
      const now = Date.now();
      for (const conn of connections) {
        const limit = conn.state === "live" ? heartbeatTimeoutMs : helloTimeoutMs;
        const since = conn.state === "live" ? conn.lastSeen : conn.openedAt;
        if (now - since > limit) {
          logger.warn(
            { node: conn.uuid, remote: conn.remote, state: conn.state },
            "agent silent; dropping connection",
          );
          conn.socket.terminate();
        }
      }
    },
    Math.max(250, Math.floor(Math.min(heartbeatTimeoutMs, helloTimeoutMs) / 2)),
  );
  sweep.unref();

  function send(conn: Connection, frame: OutgoingFrame): void {
    if (conn.socket.readyState === WebSocket.OPEN) conn.socket.send(encodeFrame(frame));
  }

  /**
   * An error frame and a close; nothing the peer sends afterwards is looked at. `hard` also stops reading
   * (a peer over its byte or frame budget) and cuts the socket shortly after, whatever the peer does.
   */
  function refuse(
    conn: Connection,
    error: { code: ErrorCode; message: string; close: number; hard?: boolean },
  ): void {
    if (conn.state === "closing") return;
    conn.state = "closing";
    conn.stopBudget();
    logger.warn({ node: conn.uuid, remote: conn.remote, code: error.code }, "agent refused");
    send(conn, { type: "error", code: error.code, message: error.message });
    conn.socket.close(error.close, error.code);
    if (error.hard) conn.socket.pause();
    setTimeout(() => conn.socket.terminate(), error.hard ? REFUSED_GRACE_MS : CLOSE_TIMEOUT_MS).unref();
    endSession(conn);
  }

  /** Forgets the node's session if this connection holds it (a refusal or a close). */
  function endSession(conn: Connection): void {
    if (conn.uuid === undefined || sessions.get(conn.uuid) !== conn) return;
    sessions.delete(conn.uuid);
    options.swarm?.leave(conn.uuid);
    logger.info({ node: conn.uuid }, "agent disconnected");
    for (const listener of disconnectedListeners) listener(conn.uuid);
  }

  /** A redirect frame and a normal close: the agent dials the owner next. */
  function sendAway(conn: Connection, owner: AgentOwner): void {
    conn.state = "closing";
    conn.stopBudget();
    send(conn, { type: "redirect", url: owner.url, conductor: owner.conductor });
    conn.socket.close(CLOSE_NORMAL, "REDIRECT");
    setTimeout(() => conn.socket.terminate(), CLOSE_TIMEOUT_MS).unref();
    endSession(conn);
  }

  function accept(socket: WebSocket, req: IncomingMessage): void {
    const now = Date.now();
    const conn: Connection = {
      socket,
      state: "new",
      lastSeen: now,
      openedAt: now,
      remote: `${req.socket.remoteAddress ?? "?"}:${req.socket.remotePort ?? "?"}`,
      address: req.socket.remoteAddress ?? "",
      tls: (req.socket as Partial<TLSSocket>).encrypted === true,
      rate: new FrameRate({ perSecond: framesPerSecond, burst: framesPerSecond * 10 }),
      stopBudget: () => undefined,
    };
    connections.add(conn);
    // ws buffers a whole message before "message": the budget counts the socket's bytes as they arrive.
    conn.stopBudget = watchBytes(req.socket, {
      limit: maxBytesBeforeHello,
      onExceeded: (bytes) =>
        refuse(conn, {
          code: "FRAME_TOO_LARGE",
          message: `${bytes} bytes before the welcome; at most ${maxBytesBeforeHello} are read`,
          close: CLOSE_TOO_BIG,
          hard: true,
        }),
    }).stop;
    socket.on("message", (data, isBinary) => {
      if (conn.state === "closing") return;
      conn.lastSeen = Date.now();
      if (!conn.rate.take()) {
        return refuse(conn, {
          code: "RATE_LIMITED",
          message: `more than ${framesPerSecond} frames per second`,
          close: CLOSE_POLICY,
          hard: true,
        });
      }
      if (isBinary) {
        return refuse(conn, {
          code: "BAD_FRAME",
          message: "binary frames are not part of the protocol",
          close: CLOSE_POLICY,
        });
      }
      onText(conn, data.toString());
    });
    socket.on("error", (error) =>
      logger.debug({ remote: conn.remote, err: error.message }, "agent socket error"),
    );
    socket.on("close", () => {
      conn.stopBudget();
      connections.delete(conn);
      endSession(conn);
    });
  }

  function onText(conn: Connection, text: string): void {
    const limit = conn.state === "live" ? maxFrameBytes : Math.min(maxFrameBytes, maxBytesBeforeHello);
    const parsed = parseFrame(text, limit);
    if (!parsed.ok) {
      const { code, message } = parsed.error;
      if (code === "FRAME_TOO_LARGE") return refuse(conn, { code, message, close: CLOSE_TOO_BIG });
      if (conn.state !== "live") return refuse(conn, { code, message, close: CLOSE_POLICY });
      // A live agent may be newer than us: answer, keep the session, and fail the call the frame was about.
      logger.warn({ node: conn.uuid, code, err: message }, "bad frame from agent");
      send(conn, { type: "error", code, message });
      const call = parsed.id === undefined ? undefined : pending.get(parsed.id);
      if (call && call.uuid === conn.uuid) {
        pending.reject(
          call.id,
          new AgentCommandError("COMMAND_FAILED", `malformed result: ${message}`, false),
        );
      }
      return;
    }
    const frame = parsed.frame;
    switch (conn.state) {
      case "new":
        if (frame.type !== "hello") {
          return refuse(conn, {
            code: "HELLO_REQUIRED",
            message: "the first frame must be a hello",
            close: CLOSE_POLICY,
          });
        }
        conn.state = "authenticating";
        void admit(conn, frame);
        return;
      case "authenticating":
      case "closing":
        return; // an agent waits for its welcome; anything sooner is noise
      case "live":
        return onSessionFrame(conn, frame);
    }
  }

  async function admit(conn: Connection, hello: Hello): Promise<void> {
    let outcome;
    try {
      outcome = await authenticateHello(directory, hello, {
        tokenLocks,
        ownerElsewhere: options.ownerElsewhere,
      });
    } catch (error) {
      logger.error({ remote: conn.remote, err: (error as Error).message }, "agent directory failed");
      send(conn, {
        type: "error",
        code: "NOT_CONNECTED",
        message: "the conductor cannot look nodes up right now",
      });
      conn.socket.close(CLOSE_GOING_AWAY, "directory unavailable");
      return;
    }
    if (outcome.ok === false) {
      if (outcome.otherBootOf !== undefined) rebootedBehindUs(outcome.otherBootOf, hello.boot_id);
      if (outcome.code === "UNKNOWN_MAC")
        logger.info(
          { remote: conn.remote, macs: hello.macs, auto_discovery: directory.discover !== undefined },
          directory.discover === undefined
            ? "an agent no node has dialled in: refused, auto-discovery is off"
            : "an agent whose MACs belong to a node expecting no agent dialled in: refused",
        );
      return refuse(conn, { code: outcome.code, message: outcome.message, close: CLOSE_POLICY });
    }
    if (conn.socket.readyState !== WebSocket.OPEN || conn.state !== "authenticating") return;
    if (outcome.ok === "redirect") {
      logger.info(
        { node: outcome.uuid, remote: conn.remote, owner: outcome.owner.conductor },
        "agent redirected to its node's owner",
      );
      return sendAway(conn, outcome.owner);
    }
    const uuid = outcome.uuid;
    conn.uuid = uuid;
    conn.state = "live";
    conn.stopBudget();
    const previous = sessions.get(uuid);
    sessions.set(uuid, conn);
    if (previous) {
      // Only a hello with the node's token gets here: the agent itself, redialled before we saw it go.
      previous.state = "closing";
      send(previous, {
        type: "error",
        code: "REPLACED",
        message: "a newer connection for this node took over",
      });
      previous.socket.close(CLOSE_POLICY, "REPLACED");
    }
    send(conn, {
      type: "welcome",
      node_uuid: uuid,
      ...(outcome.newToken === undefined ? {} : { token: outcome.newToken }),
      heartbeat_interval_ms: heartbeatIntervalMs,
      fast_track: outcome.fastTrack,
    });
    logger.info(
      {
        node: uuid,
        remote: conn.remote,
        agent_version: hello.agent_version,
        boot_id: hello.boot_id,
        token_issued: outcome.newToken !== undefined,
      },
      "agent connected",
    );
    // Commands sent on a connection that died may never have arrived: the agent ignores ids it already has.
    for (const call of pending.forNode(uuid)) {
      const again = call.resendArgs === undefined ? null : parseCommandArgs(call.name, call.resendArgs());
      send(conn, { type: "command", id: call.id, name: call.name, args: again?.ok ? again.args : call.args });
    }
    for (const listener of connectedListeners) listener(uuid, hello);
  }

  /**
   * A tokenless hello from a new boot of a node whose agent has no live session here: the machine most likely
   * rebooted under its agent (a reset, a crash, a power blip). Commands waiting on the old boot's agent will
   * never be answered, so they fail now with AGENT_REBOOTED (retryable) instead of at their timeout; a step
   * that can resume (write_image) boots the ramdisk again through the node's lock. The hello itself is still
   * refused: a MAC and a boot id prove nothing, so at worst a forger on the provisioning network, acting while
   * the real agent is away, makes the conductor reboot the node sooner than its timeout would.
   */
  function rebootedBehindUs(uuid: string, bootId: string): void {
    if (sessions.has(uuid)) return; // the agent is still here: the hello is not the node's
    const waiting = pending.forNode(uuid);
    if (waiting.length === 0) {
      for (const listener of rebootedListeners) listener(uuid, bootId);
      return;
    }
    logger.warn(
      { node: uuid, boot_id: bootId, commands: waiting.map((call) => call.name) },
      "a new boot of the node dialled in while its agent's commands ran; failing them",
    );
    for (const call of waiting) {
      pending.reject(
        call.id,
        new AgentRebooted(
          bootId,
          `the node booted again (boot ${bootId}) while ${call.name} ran; its agent is gone`,
        ),
      );
    }
  }

  function onSessionFrame(conn: Connection, frame: Frame): void {
    switch (frame.type) {
      case "heartbeat":
        send(conn, { type: "heartbeat", ts: Date.now() });
        return;
      case "progress": {
        const call = pending.get(frame.id);
        if (call && call.uuid === conn.uuid) {
          const { type: _type, v: _v, id: _id, ...progress } = frame;
          call.onProgress?.(progress);
        }
        return;
      }
      case "result": {
        // Ack whatever we get, even for a call that already timed out, so the agent can forget it.
        send(conn, { type: "ack", id: frame.id });
        const call = pending.get(frame.id);
        if (!call) {
          // no call here waits for it (yet): a new owner's step may ask for this id once it resumes
          if (conn.uuid !== undefined) {
            const outcome = frame.ok
              ? { ok: true as const, value: frame.value }
              : { ok: false as const, error: frame.error };
            unclaimed.keep(frame.id, conn.uuid, outcome);
          }
          return;
        }
        if (call.uuid !== conn.uuid) return;
        if (frame.ok) pending.resolve(frame.id, frame.value);
        else pending.reject(frame.id, frame.error);
        return;
      }
      case "error":
        logger.warn(
          { node: conn.uuid, code: frame.code, err: frame.message },
          "agent reported a protocol error",
        );
        return;
      case "swarm_join":
      case "swarm_ask":
      case "swarm_have":
      case "swarm_drop":
      case "swarm_leave":
        if (conn.uuid !== undefined)
          handleSwarmFrame(
            options.swarm,
            { node: conn.uuid, address: conn.address, tls: conn.tls, send: (out) => send(conn, out) },
            frame,
          );
        return;
      case "hello":
      case "welcome":
      case "command":
      case "ack":
      case "cancel":
      case "redirect":
      case "swarm_reply":
        send(conn, {
          type: "error",
          code: "BAD_FRAME",
          message: `an agent does not send ${frame.type} frames here`,
        });
        return;
    }
  }

  function attach(server: Server, others: readonly UpgradeRoute[] = []): void {
    const listener = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
      const path = (req.url ?? "/").split("?")[0] ?? "/";
      const other = others.find((route) => route.matches(path));
      if (other !== undefined) return other.handle(req, socket, head);
      if (path !== AGENT_PATH) {
        return answerUpgrade(socket, { status: 404, message: "No WebSocket endpoint at this path." });
      }
      if (closed) return answerUpgrade(socket, { status: 503, message: "The conductor is stopping." });
      const source = req.socket.remoteAddress ?? "?";
      const slot = caps.tryOpen(source);
      if (!slot.ok) {
        logger.warn({ remote: source, status: slot.status }, "agent connection refused at the upgrade");
        return answerUpgrade(socket, slot);
      }
      // The raw socket's close gives the slot back, whether or not the handshake succeeds.
      socket.once("close", () => caps.close(source));
      wss.handleUpgrade(req, socket, head, (ws) => accept(ws, req));
    };
    server.on("upgrade", listener);
    attached.push({ server, listener });
  }

  function call(
    nodeUuid: string,
    command: { name: CommandName; args?: unknown },
    callOptions: CallOptions = {},
  ): Promise<unknown> {
    // Callers typed against a looser interface may pass any string: refuse, don't throw.
    if (!COMMAND_NAMES.includes(command.name)) {
      return Promise.reject(
        new AgentCommandError("UNKNOWN_COMMAND", `unknown command ${JSON.stringify(command.name)}`),
      );
    }
    const args = parseCommandArgs(command.name, command.args);
    if (!args.ok) return Promise.reject(new AgentCommandError("BAD_ARGS", args.message));
    if (closed) return Promise.reject(new AgentCommandError("GATEWAY_CLOSED"));
    const { signal, timeoutMs } = callOptions;
    const id = callOptions.id ?? randomUUID();
    if (pending.get(id)) {
      return Promise.reject(new AgentCommandError("BUSY", `command ${id} is already being waited for`));
    }
    const arrived = callOptions.id === undefined ? undefined : unclaimed.claim(id, nodeUuid);
    if (arrived) {
      logger.info(
        { node: nodeUuid, id, command: command.name },
        "a result that arrived earlier settles the call",
      );
      return arrived.ok
        ? Promise.resolve(arrived.value)
        : Promise.reject(
            new AgentCommandError(arrived.error.code, arrived.error.message, arrived.error.retryable),
          );
    }
    const conn = sessions.get(nodeUuid);
    if (!conn)
      return Promise.reject(
        new AgentCommandError("NOT_CONNECTED", `no agent connected for node ${nodeUuid}`),
      );
    if (signal?.aborted) return Promise.reject(new AgentCommandError("CANCELLED"));
    return new Promise((resolve, reject) => {
      const cancelOnAgent = (): void => {
        const current = sessions.get(nodeUuid);
        if (current) send(current, { type: "cancel", id });
      };
      const onAbort = (): void => {
        cancelOnAgent();
        pending.reject(id, new AgentCommandError("CANCELLED", `${command.name} cancelled by the caller`));
      };
      const timer =
        timeoutMs === undefined
          ? undefined
          : setTimeout(() => {
              cancelOnAgent();
              pending.reject(
                id,
                new AgentCommandError("TIMEOUT", `${command.name} did not finish in ${timeoutMs} ms`),
              );
            }, timeoutMs);
      signal?.addEventListener("abort", onAbort, { once: true });
      pending.add({
        id,
        uuid: nodeUuid,
        name: command.name,
        args: args.args,
        onProgress: callOptions.onProgress,
        ...(callOptions.resendArgs === undefined ? {} : { resendArgs: callOptions.resendArgs }),
        settle: (outcome) => {
          clearTimeout(timer);
          signal?.removeEventListener("abort", onAbort);
          if ("error" in outcome) reject(outcome.error);
          else resolve(outcome.value);
        },
      });
      send(conn, { type: "command", id, name: command.name, args: args.args });
    });
  }

  async function close(): Promise<void> {
    closed = true;
    clearInterval(sweep);
    for (const { server, listener } of attached) server.off("upgrade", listener);
    pending.rejectAll(new AgentCommandError("GATEWAY_CLOSED"));
    for (const conn of connections) conn.socket.close(CLOSE_GOING_AWAY, "conductor stopping");
    await new Promise<void>((resolve) => wss.close(() => resolve()));
    for (const conn of connections) conn.socket.terminate();
  }

  return {
    attach,
    call,
    isConnected: (uuid) => sessions.has(uuid),
    addressOf(uuid) {
      const address = sessions.get(uuid)?.address;
      if (address === undefined || address === "") return undefined;
      return address.startsWith("::ffff:") ? address.slice(7) : address;
    },
    sessionNodes: () => [...sessions.keys()],
    retire(uuid) {
      const conn = sessions.get(uuid);
      if (!conn) return false;
      logger.info({ node: uuid }, "agent session retired: the node was powered off or rebooted");
      conn.state = "closing";
      conn.stopBudget();
      endSession(conn);
      // NOTE: terminate, not close: a dead agent never answers the closing handshake
      conn.socket.terminate();
      return true;
    },
    redirect(uuid, owner) {
      const conn = sessions.get(uuid);
      if (!conn) return false;
      logger.info({ node: uuid, owner: owner.conductor }, "agent sent to its node's new owner");
      sendAway(conn, owner);
      return true;
    },
    stats: () => ({
      connections: connections.size,
      unwelcomed: [...connections].filter((conn) => conn.state !== "live").length,
    }),
    onConnected: (listener) => void connectedListeners.push(listener),
    onDisconnected: (listener) => void disconnectedListeners.push(listener),
    onRebooted: (listener) => void rebootedListeners.push(listener),
    close,
  };
}
