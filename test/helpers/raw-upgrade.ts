import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { connect } from "node:net";
import type { Socket } from "node:net";

/** Which of these events comes first (an 'error' is followed by 'close'; events.once would reject). */
function firstOf(socket: Socket, events: Record<string, boolean>): Promise<boolean> {
  return new Promise((resolve) => {
    for (const [name, value] of Object.entries(events)) socket.once(name, () => resolve(value));
  });
}

function upgradeRequest(path: string): string {
  return [
    `GET ${path} HTTP/1.1`,
    "Host: 127.0.0.1",
    "Upgrade: websocket",
    "Connection: Upgrade",
    `Sec-WebSocket-Key: ${randomBytes(16).toString("base64")}`,
    "Sec-WebSocket-Version: 13",
    "",
    "",
  ].join("\r\n");
}

/**
 * Sends one WebSocket upgrade request over a raw TCP socket and reads until the server closes it: what a
 * client sees (status, body) and whether the server, not the client, ended the connection.
 */
export async function rawUpgrade(
  port: number,
  path: string,
): Promise<{ status: number; body: string; endedByServer: boolean }> {
  const socket = connect(port, "127.0.0.1");
  const chunks: Buffer[] = [];
  socket.on("data", (chunk: Buffer) => chunks.push(chunk));
  socket.on("error", () => undefined);
  await once(socket, "connect");
  socket.write(upgradeRequest(path));
  // 'end' is the server's FIN; a test timeout (not ours) catches a server that never answers
  const ended = await firstOf(socket, { end: true, close: true });
  socket.destroy();
  const text = Buffer.concat(chunks).toString("latin1");
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
  const body = text.slice(text.indexOf("\r\n\r\n") + 4);
  return { status, body, endedByServer: ended };
}

/** A WebSocket opened by hand (101 read), for sending frames no WebSocket library would build. */
export async function rawWebSocket(port: number, path = "/v1/agent"): Promise<Socket> {
  const socket = connect(port, "127.0.0.1");
  socket.on("error", () => undefined);
  await once(socket, "connect");
  socket.write(upgradeRequest(path));
  let head = "";
  while (!head.includes("\r\n\r\n")) {
    const [chunk] = (await once(socket, "data")) as [Buffer];
    head += chunk.toString("latin1");
  }
  if (!head.startsWith("HTTP/1.1 101")) throw new Error(`no upgrade: ${head.split("\r\n")[0]}`);
  return socket;
}

/**
 * Streams one masked text frame that declares `length` payload bytes (zeros masked with a zero key, so
 * the payload is spaces), with backpressure; stops early when the server closes. Resolves with bytes written.
 */
export async function sendHugeFrame(socket: Socket, length: number): Promise<number> {
  const header = Buffer.alloc(14);
  header[0] = 0x81; // FIN + text
  header[1] = 0x80 | 127; // masked, 64-bit length
  header.writeBigUInt64BE(BigInt(length), 2);
  // mask key 0,0,0,0: the payload goes out as written
  const chunk = Buffer.alloc(64 * 1024, 0x20);
  let written = 0;
  if (!socket.write(header) && !(await firstOf(socket, { drain: true, close: false }))) return 0;
  while (written < length && !socket.destroyed && socket.writable) {
    const ok = socket.write(chunk);
    written += chunk.length;
    if (!ok) {
      const drained = await firstOf(socket, { drain: true, close: false });
      if (!drained) break;
    }
  }
  return written;
}
