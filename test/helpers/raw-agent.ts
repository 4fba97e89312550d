import { once } from "node:events";
import { WebSocket } from "ws";
import { encodeFrame, parseFrame } from "../../shared/protocol.ts";
import type { Frame, OutgoingFrame } from "../../shared/protocol.ts";
import { waitFor } from "./wait.ts";

/** A hand-driven agent over a real WebSocket: the test sends raw text and reads every frame. */
export class RawAgent {
  readonly frames: Frame[] = [];
  closeCode: number | undefined;
  private constructor(readonly socket: WebSocket) {
    socket.on("message", (data) => {
      const parsed = parseFrame(data.toString(), 1024 * 1024);
      if (parsed.ok) this.frames.push(parsed.frame);
    });
    socket.on("close", (code) => {
      this.closeCode = code;
    });
    // a refused peer may be cut mid-send (ECONNRESET): the close code is what tests look at
    socket.on("error", () => undefined);
  }

  static async connect(url: string): Promise<RawAgent> {
    const socket = new WebSocket(url);
    const agent = new RawAgent(socket);
    await once(socket, "open");
    return agent;
  }

  sendRaw(text: string): void {
    this.socket.send(text);
  }

  send(frame: OutgoingFrame): void {
    this.socket.send(encodeFrame(frame));
  }

  hello(options: { macs: string[]; bootId?: string; token?: string }): void {
    this.send({
      type: "hello",
      agent_version: "test",
      macs: options.macs,
      bmc_address: null,
      boot_id: options.bootId ?? "boot-1",
      ...(options.token === undefined ? {} : { token: options.token }),
    });
  }

  async next<T extends Frame["type"]>(type: T): Promise<Extract<Frame, { type: T }>> {
    let found: Frame | undefined;
    await waitFor(() => (found = this.frames.find((frame) => frame.type === type)) !== undefined, {
      what: type,
    });
    this.frames.splice(this.frames.indexOf(found as Frame), 1);
    return found as Extract<Frame, { type: T }>;
  }

  async closed(): Promise<number> {
    await waitFor(() => this.closeCode !== undefined, { what: "close" });
    return this.closeCode as number;
  }

  get open(): boolean {
    return this.socket.readyState === WebSocket.OPEN;
  }
}
