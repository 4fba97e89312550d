import { createReadStream, statSync } from "node:fs";
import { createServer } from "node:http";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { WebSocketServer } from "ws";
import type { WebSocket } from "ws";
import { FrameSchema, PROTOCOL_VERSION } from "../../shared/protocol.ts";
import type { CommandFrame, CommandName, Frame, ResultFrame } from "../../shared/protocol.ts";
import { waitFor } from "./wait.ts";

/**
 * A conductor just big enough for one agent: it welcomes every hello (issuing the token once), answers
 * heartbeats, acknowledges results, lets the test send commands, and serves files over plain HTTP (the images
 * the agent downloads; any other path answers the stand-in's GET).
 */
export class FakeConductor {
  readonly httpRequests: { url: string; userAgent: string }[] = [];
  readonly upgrades: string[] = [];
  readonly frames: Frame[] = [];
  private socket: WebSocket | undefined;
  private tokenIssued = false;
  private nextId = 1;

  private constructor(
    private readonly server: Server,
    private readonly files: Map<string, string>,
  ) {}

  static async start(): Promise<FakeConductor> {
    const server = createServer();
    const conductor = new FakeConductor(server, new Map());
    server.on("request", (request: IncomingMessage, response: ServerResponse) =>
      conductor.onRequest(request, response),
    );
    new WebSocketServer({ server }).on("connection", (socket, request: IncomingMessage) => {
      conductor.upgrades.push(request.url ?? "");
      conductor.socket = socket;
      socket.on("message", (data: Buffer) => conductor.onFrame(socket, data));
    });
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
    return conductor;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** Serves a local file at http://10.0.2.2:PORT/files/NAME. */
  serve(name: string, path: string): string {
    this.files.set(`/files/${name}`, path);
    return `http://10.0.2.2:${this.port}/files/${name}`;
  }

  /** Sends a command to the connected agent and resolves with its result. */
  async call(name: CommandName, args: unknown, timeoutMs: number): Promise<ResultFrame> {
    await waitFor(() => this.socket !== undefined && this.tokenIssued, { timeoutMs, intervalMs: 200 });
    const id = `${name}-${this.nextId++}`;
    const command: CommandFrame = { type: "command", v: PROTOCOL_VERSION, id, name, args };
    this.socket!.send(JSON.stringify(command));
    await waitFor(() => this.result(id) !== undefined, { timeoutMs, intervalMs: 200 });
    return this.result(id)!;
  }

  async close(): Promise<void> {
    this.socket?.terminate();
    await new Promise((done) => this.server.close(done));
  }

  private result(id: string): ResultFrame | undefined {
    return this.frames.find((frame): frame is ResultFrame => frame.type === "result" && frame.id === id);
  }

  private onRequest(request: IncomingMessage, response: ServerResponse): void {
    const url = request.url ?? "";
    this.httpRequests.push({ url, userAgent: request.headers["user-agent"] ?? "" });
    const path = this.files.get(url);
    if (path === undefined) {
      response.end("stand-in ok\n");
      return;
    }
    response.setHeader("content-length", statSync(path).size);
    createReadStream(path).pipe(response);
  }

  private onFrame(socket: WebSocket, data: Buffer): void {
    const frame = FrameSchema.parse(JSON.parse(data.toString()));
    this.frames.push(frame);
    const reply = (answer: Frame): void => socket.send(JSON.stringify(answer));
    if (frame.type === "hello") {
      reply({
        type: "welcome",
        v: PROTOCOL_VERSION,
        node_uuid: "00000000-0000-4000-8000-00000000a4a4",
        ...(this.tokenIssued ? {} : { token: "ramdisk-test-token" }),
        heartbeat_interval_ms: 5_000,
        fast_track: false,
      });
      this.tokenIssued = true;
    } else if (frame.type === "heartbeat") {
      reply({ type: "heartbeat", v: PROTOCOL_VERSION, ts: Date.now() });
    } else if (frame.type === "result") {
      reply({ type: "ack", v: PROTOCOL_VERSION, id: frame.id });
    }
  }
}
