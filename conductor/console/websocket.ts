import { WebSocketServer, type RawData, type WebSocket } from "ws";
import type { Logger } from "../../shared/log.ts";
import { answerUpgrade, type UpgradeRoute } from "../agents/upgrade-answer.ts";
import type { ConsoleSessions } from "./sessions.ts";

/** Where a node's console stream is served: `/v1/console/<uuid>`, behind the conductor's signed link. */
export const CONSOLE_PATH_PREFIX = "/v1/console/";

/** The path of a node's console stream, before it is signed. */
export function consolePath(uuid: string): string {
  return `${CONSOLE_PATH_PREFIX}${uuid}`;
}

/** How a console URL is checked: the conductor's signed links (images/signed-links.ts), method GET. */
export interface ConsoleLinkCheck {
  check(rawUrl: string): "ok" | "expired" | "invalid";
}

/** A viewer that lets this much output pile up unsent is cut off (a stalled client must not hold memory). */
const MAX_BUFFERED_BYTES = 1024 * 1024;
/** Keystrokes arrive in small frames; a paste of a few KiB is the most a serial line takes anyway. */
const MAX_INPUT_FRAME_BYTES = 4096;

function bytesOf(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}

/**
 * The console's WebSocket endpoint: a link signed by GET …/states/console (after the node's get_console
 * policy; the signature covers the path, so it opens that node's stream only, for a few minutes); the viewer gets the scrollback, then live output as binary
 * frames, and what it sends (binary or text) goes to the serial port. No signature, a forged or expired one, or a
 * console not running here: refused before the handshake, in Ironic's error envelope.
 */
export function consoleUpgradeRoute(deps: {
  sessions: ConsoleSessions;
  links: ConsoleLinkCheck;
  logger: Logger;
}): UpgradeRoute & { close(): void } {
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: MAX_INPUT_FRAME_BYTES,
    perMessageDeflate: false,
  });

  function accept(ws: WebSocket, uuid: string): void {
    const attachment = deps.sessions.attach(uuid, {
      send: (chunk) => {
        if (ws.readyState !== ws.OPEN) return;
        if (ws.bufferedAmount > MAX_BUFFERED_BYTES) return ws.close(1008, "viewer too slow");
        ws.send(chunk, { binary: true });
      },
      end: (reason) => ws.close(1000, reason.slice(0, 120)),
    });
    if (attachment === undefined) return ws.close(1013, "console not available");
    ws.on("message", (data) => attachment.write(bytesOf(data)));
    ws.on("close", () => attachment.detach());
    ws.on("error", () => ws.terminate());
  }

  return {
    matches: (path) => path.startsWith(CONSOLE_PATH_PREFIX),
    handle(req, socket, head) {
      const url = new URL(req.url ?? "/", "http://console.invalid");
      const uuid = url.pathname.slice(CONSOLE_PATH_PREFIX.length);
      if (deps.links.check(req.url ?? "") !== "ok")
        return answerUpgrade(socket, {
          status: 401,
          message: "The console link is missing its signature, or it is invalid or expired.",
        });
      if (!deps.sessions.has(uuid))
        return answerUpgrade(socket, {
          status: 400,
          message: `Console access is not enabled on node ${uuid}`,
        });
      deps.logger.info({ node: uuid, remote: req.socket.remoteAddress }, "console viewer attached");
      wss.handleUpgrade(req, socket, head, (ws) => accept(ws, uuid));
    },
    close() {
      for (const client of wss.clients) client.terminate();
      wss.close();
    },
  };
}
