import { randomUUID } from "node:crypto";
import type { IncomingMessage, Server } from "node:http";
import type { Duplex } from "node:stream";
import { WebSocket, WebSocketServer } from "ws";
import type { ErrorCode } from "../../shared/errors.ts";
import type { Logger } from "../../shared/log.ts";
import { COMMAND_NAMES, encodeFrame, parseCommandArgs, parseFrame } from "../../shared/protocol.ts";
import type { CommandName, Frame, Hello, OutgoingFrame, Progress } from "../../shared/protocol.ts";
import { AgentCommandError } from "./command-error.ts";
import type { AgentDirectory } from "./directory.ts";
import { authenticateHello } from "./handshake.ts";
import { KeyedMutex } from "./keyed-mutex.ts";
import { PendingCalls } from "./pending-calls.ts";

export const AGENT_PATH = "/v1/agent";

export interface AgentGatewayOptions {
  directory: AgentDirectory;
  logger: Logger;
  /** Largest frame accepted from an agent (UTF-8 bytes). Default 1 MiB. */
  maxFrameBytes?: number;
  /** A session silent this long is dropped. Default 30 s; agents are told to beat three times as often. */
  heartbeatTimeoutMs?: number;
  /** A connection must say hello within this time. Default 10 s. */
  helloTimeoutMs?: number;
}

export interface CallOptions {
  signal?: AbortSignal;
  onProgress?: (progress: Progress) => void;
  /** Gives up (and cancels the command on the agent) after this long. Default: no limit. */
  timeoutMs?: number;
}

export type ConnectedListener = (uuid: string, hello: Hello) => void;
export type DisconnectedListener = (uuid: string) => void;

export interface AgentGateway {
  /** Handles WebSocket upgrades on the agent path of this server; other paths are left alone. */
  attach(server: Server): void;
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
  onConnected(listener: ConnectedListener): void;
  onDisconnected(listener: DisconnectedListener): void;
  /** Closes every agent connection and rejects pending calls with GATEWAY_CLOSED. */
  close(): Promise<void>;
}

interface Connection {
  socket: WebSocket;
  state: "new" | "authenticating" | "live";
  lastSeen: number;
  openedAt: number;
  uuid?: string;
  remote: string;
}

/** Close codes: 1008 policy violation (refusals), 1009 message too big, 1001 going away. */
const CLOSE_POLICY = 1008;
const CLOSE_TOO_BIG = 1009;
const CLOSE_GOING_AWAY = 1001;

/** Creates the conductor's agent endpoint: authenticates agents, keeps one session per node, runs commands. */
export function createAgentGateway(options: AgentGatewayOptions): AgentGateway {
  const { directory } = options;
  const logger = options.logger.child({ component: "agent-gateway" });
  const maxFrameBytes = options.maxFrameBytes ?? 1024 * 1024;
  const heartbeatTimeoutMs = options.heartbeatTimeoutMs ?? 30_000;
  const heartbeatIntervalMs = Math.max(100, Math.floor(heartbeatTimeoutMs / 3));
  const helloTimeoutMs = options.helloTimeoutMs ?? 10_000;

  // Twice the frame limit: frames in between get a FRAME_TOO_LARGE answer; ws cuts anything bigger unread.
  const wss = new WebSocketServer({ noServer: true, maxPayload: maxFrameBytes * 2 });
  const connections = new Set<Connection>();
  const sessions = new Map<string, Connection>();
  const pending = new PendingCalls();
  const tokenLocks = new KeyedMutex();
  const connectedListeners: ConnectedListener[] = [];
  const disconnectedListeners: DisconnectedListener[] = [];
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

  function refuse(conn: Connection, error: { code: ErrorCode; message: string; close: number }): void {
    logger.warn({ node: conn.uuid, remote: conn.remote, code: error.code }, "agent refused");
    send(conn, { type: "error", code: error.code, message: error.message });
    conn.socket.close(error.close, error.code);
  }

  wss.on("connection", (socket: WebSocket, req: IncomingMessage) => {
    const now = Date.now();
    const conn: Connection = {
      socket,
      state: "new",
      lastSeen: now,
      openedAt: now,
      remote: `${req.socket.remoteAddress ?? "?"}:${req.socket.remotePort ?? "?"}`,
    };
    connections.add(conn);
    socket.on("message", (data, isBinary) => {
      conn.lastSeen = Date.now();
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
      connections.delete(conn);
      if (conn.uuid !== undefined && sessions.get(conn.uuid) === conn) {
        sessions.delete(conn.uuid);
        logger.info({ node: conn.uuid }, "agent disconnected");
        for (const listener of disconnectedListeners) listener(conn.uuid);
      }
    });
  });

  function onText(conn: Connection, text: string): void {
    const parsed = parseFrame(text, maxFrameBytes);
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
        return; // an agent waits for its welcome; anything sooner is noise
      case "live":
        return onSessionFrame(conn, frame);
    }
  }

  async function admit(conn: Connection, hello: Hello): Promise<void> {
    let outcome;
    try {
      outcome = await authenticateHello(directory, hello, tokenLocks);
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
    if (!outcome.ok)
      return refuse(conn, { code: outcome.code, message: outcome.message, close: CLOSE_POLICY });
    if (conn.socket.readyState !== WebSocket.OPEN) return;
    const uuid = outcome.uuid;
    conn.uuid = uuid;
    conn.state = "live";
    const previous = sessions.get(uuid);
    sessions.set(uuid, conn);
    if (previous) {
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
    for (const call of pending.forNode(uuid))
      send(conn, { type: "command", id: call.id, name: call.name, args: call.args });
    for (const listener of connectedListeners) listener(uuid, hello);
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
        if (!call || call.uuid !== conn.uuid) return;
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
      case "hello":
      case "welcome":
      case "command":
      case "ack":
      case "cancel":
        send(conn, {
          type: "error",
          code: "BAD_FRAME",
          message: `an agent does not send ${frame.type} frames here`,
        });
        return;
    }
  }

  function attach(server: Server): void {
    const listener = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
      const path = (req.url ?? "/").split("?")[0];
      if (path !== AGENT_PATH) return;
      if (closed) {
        socket.destroy();
        return;
      }
      wss.handleUpgrade(req, socket, head, (ws) => wss.emit("connection", ws, req));
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
    const conn = sessions.get(nodeUuid);
    if (!conn)
      return Promise.reject(
        new AgentCommandError("NOT_CONNECTED", `no agent connected for node ${nodeUuid}`),
      );
    const { signal, timeoutMs } = callOptions;
    if (signal?.aborted) return Promise.reject(new AgentCommandError("CANCELLED"));
    const id = randomUUID();
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
    onConnected: (listener) => void connectedListeners.push(listener),
    onDisconnected: (listener) => void disconnectedListeners.push(listener),
    close,
  };
}
