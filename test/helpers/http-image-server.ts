import { createReadStream } from "node:fs";
import { readFile, stat } from "node:fs/promises";
import { createServer } from "node:http";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import { createServer as createTlsServer } from "node:https";
import type { AddressInfo, Socket } from "node:net";

/** Misbehaviour a route can be told to show. */
export interface FaultPlan {
  /** Destroy the connection after sending this many body bytes... */
  dropAfterBytes?: number;
  /** ...this many times (then serve normally). Default 1. */
  dropTimes?: number;
  /** Answer every request with this status and no file. */
  status?: number;
  /** Send headers and this many body bytes, then nothing ever again. */
  stallAfterBytes?: number;
  /** Pretend Range is not supported: always 200 with the whole file. */
  ignoreRange?: boolean;
  /** Answer this many requests with 503 first. */
  unavailableTimes?: number;
  /** Send this many body bytes, then the rest once `resumeWhen` settles (a write caught mid-way). */
  pauseAfterBytes?: number;
  resumeWhen?: Promise<void>;
  /** Send the body `bytes` at a time every `everyMs` (a server that drips, never silent long enough to stall). */
  drip?: { bytes: number; everyMs: number };
}

export interface RequestRecord {
  path: string;
  range: string | undefined;
  status: number;
}

export interface HttpImageServer {
  /** Base URL, e.g. http://127.0.0.1:PORT */
  readonly url: string;
  /** Every request served, in order, with its Range header. */
  readonly requests: RequestRecord[];
  /** Bytes the server sent for a path (headers included), over every response so far. */
  bytesServed(path: string): number;
  /** Serve a file at a path ("/disk.img"), with optional faults. */
  serve(path: string, file: string, faults?: FaultPlan): void;
  close(): Promise<void>;
}

interface Route {
  file: string;
  faults: FaultPlan;
  drops: number;
  unavailable: number;
}

/** Parses "bytes=N-" or "bytes=N-M" (single ranges only, which is all the agent sends). */
function parseRange(header: string, size: number): { start: number; end: number } | undefined {
  const match = /^bytes=(\d+)-(\d*)$/.exec(header);
  if (!match) return undefined;
  const start = Number(match[1]);
  const end = match[2] === "" ? size - 1 : Math.min(Number(match[2]), size - 1);
  if (start > end || start >= size) return undefined;
  return { start, end };
}

/** A real node:http (or https, given a key and certificate) server on 127.0.0.1 serving files with Range support and fault injection. */
export async function startHttpImageServer(
  options: { tls?: { key: string | Buffer; cert: string | Buffer } } = {},
): Promise<HttpImageServer> {
  const routes = new Map<string, Route>();
  const requests: RequestRecord[] = [];
  const sockets = new Set<Socket>();
  const served = new Map<string, number>();

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = new URL(req.url ?? "/", "http://x").pathname;
    const range = req.headers.range;
    const route = routes.get(path);
    const socket = req.socket;
    const before = socket.bytesWritten;
    res.on("close", () => served.set(path, (served.get(path) ?? 0) + socket.bytesWritten - before));
    const answer = (status: number): void => {
      requests.push({ path, range, status });
      res.writeHead(status, { "content-type": "text/plain" }).end(`status ${status}\n`);
    };
    if (!route) return answer(404);
    if (route.faults.status !== undefined) return answer(route.faults.status);
    if (route.unavailable < (route.faults.unavailableTimes ?? 0)) {
      route.unavailable += 1;
      return answer(503);
    }
    const size = (await stat(route.file)).size;
    let start = 0;
    let end = size - 1;
    let status = 200;
    if (range !== undefined && !route.faults.ignoreRange) {
      const parsed = parseRange(range, size);
      if (!parsed) {
        requests.push({ path, range, status: 416 });
        res.writeHead(416, { "content-range": `bytes */${size}` }).end();
        return;
      }
      ({ start, end } = parsed);
      status = 206;
    }
    requests.push({ path, range, status });
    const headers: Record<string, string | number> = {
      "content-type": "application/octet-stream",
      "content-length": end - start + 1,
      "accept-ranges": "bytes",
      etag: `"${size}"`,
    };
    if (status === 206) headers["content-range"] = `bytes ${start}-${end}/${size}`;
    res.writeHead(status, headers);
    if (req.method === "HEAD" || size === 0) return void res.end();

    const drip = route.faults.drip;
    if (drip !== undefined) {
      const body = (await readFile(route.file)).subarray(start, end + 1);
      let at = 0;
      const timer = setInterval(() => {
        if (res.destroyed || at >= body.length) {
          clearInterval(timer);
          if (!res.destroyed) res.end();
          return;
        }
        res.write(body.subarray(at, at + drip.bytes));
        at += drip.bytes;
      }, drip.everyMs);
      res.on("close", () => clearInterval(timer));
      return;
    }
    const dropping = route.faults.dropAfterBytes !== undefined && route.drops < (route.faults.dropTimes ?? 1);
    if (dropping) route.drops += 1;
    const pauseAt = route.faults.pauseAfterBytes;
    if (pauseAt !== undefined && !dropping && end - start + 1 > pauseAt) {
      const head = createReadStream(route.file, { start, end: start + pauseAt - 1 });
      head.pipe(res, { end: false });
      head.on("end", () => {
        void (route.faults.resumeWhen ?? Promise.resolve()).then(() =>
          createReadStream(route.file, { start: start + pauseAt, end }).pipe(res),
        );
      });
      return;
    }
    const cutAt = dropping ? route.faults.dropAfterBytes : route.faults.stallAfterBytes;
    if (cutAt === undefined) {
      createReadStream(route.file, { start, end, highWaterMark: 1024 * 1024 }).pipe(res);
      return;
    }
    const sendEnd = Math.min(end, start + cutAt - 1);
    const body = createReadStream(route.file, { start, end: sendEnd });
    body.pipe(res, { end: false });
    body.on("end", () => {
      // Drop: flush what was sent, then close, so the client holds exactly `dropAfterBytes` bytes and sees a
      // body shorter than Content-Length. Stall: it sees nothing more, ever.
      if (!dropping) return;
      const socket = res.socket;
      socket?.end();
      setTimeout(() => socket?.destroy(), 1_000).unref();
    });
  };

  const listener = (req: IncomingMessage, res: ServerResponse): void => {
    handle(req, res).catch((error: unknown) => {
      res.destroy(error instanceof Error ? error : new Error(String(error)));
    });
  };
  const server: Server = options.tls ? createTlsServer(options.tls, listener) : createServer(listener);
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `${options.tls ? "https" : "http"}://127.0.0.1:${port}`,
    requests,
    bytesServed: (path) => served.get(path) ?? 0,
    serve(path, file, faults = {}) {
      routes.set(path, { file, faults, drops: 0, unavailable: 0 });
    },
    close() {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
