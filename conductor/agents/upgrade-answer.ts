import { STATUS_CODES } from "node:http";
import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";

/** Another WebSocket endpoint on the API's server (the console's): the gateway hands it the paths it claims. */
export interface UpgradeRoute {
  matches(path: string): boolean;
  handle(req: IncomingMessage, socket: Duplex, head: Buffer): void;
}

/** A socket that has not drained its answer by then is cut: an answer must never hold a descriptor. */
const ANSWER_FLUSH_MS = 5_000;

/**
 * Answers an HTTP upgrade request that will not become a WebSocket, in Ironic's error envelope, and
 * destroys the socket once the answer is written. Every refused upgrade goes through here, so none is
 * left half-open (a listener that ignores an upgrade leaves its socket in CLOSE_WAIT for good).
 */
export function answerUpgrade(socket: Duplex, answer: { status: number; message: string }): void {
  socket.on("error", () => socket.destroy());
  if (socket.destroyed) return;
  // The same double-encoded envelope the API writes (the gateway does not depend on the API's modules).
  const body = JSON.stringify({
    error_message: JSON.stringify({ faultcode: "Client", faultstring: answer.message, debuginfo: null }),
  });
  const head = [
    `HTTP/1.1 ${answer.status} ${STATUS_CODES[answer.status] ?? "Error"}`,
    "Connection: close",
    "Content-Type: application/json",
    `Content-Length: ${Buffer.byteLength(body)}`,
  ];
  const cut = setTimeout(() => socket.destroy(), ANSWER_FLUSH_MS);
  cut.unref();
  socket.end(`${head.join("\r\n")}\r\n\r\n${body}`, () => {
    clearTimeout(cut);
    socket.destroy();
  });
}
