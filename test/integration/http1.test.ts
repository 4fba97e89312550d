import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer as createHttpServer } from "node:http";
import type { RequestListener, Server } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import { createServer as createTcpServer } from "node:net";
import type { AddressInfo, Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ImageError } from "../../agent/image/errors.ts";
import { ImageDownload } from "../../agent/image/fetch.ts";
import { ConnectionDroppedError, Http1Connection } from "../../agent/image/http1.ts";
import type { Http1Response } from "../../agent/image/http1.ts";
import { ImageWriter } from "../../agent/image/writer.ts";
import { startHttpImageServer } from "../helpers/http-image-server.ts";
import { waitFor } from "../helpers/wait.ts";
import { selfSignedCert } from "../helpers/tls.ts";

const OPTIONS = { connectTimeoutMs: 2_000, stallTimeoutMs: 2_000 };
const BODY = randomBytes(3 * 1024 * 1024 + 12_345);
const digest = (data: Buffer): string => createHash("sha256").update(data).digest("hex");

let dir: string;
let tls: { key: string; cert: string };

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "anvil-http1-"));
  tls = await selfSignedCert(dir);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function listen(server: Server, scheme = "http"): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return `${scheme}://127.0.0.1:${port}`;
}

async function close(server: {
  close(cb: () => void): unknown;
  closeAllConnections?: () => void;
}): Promise<void> {
  server.closeAllConnections?.();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

/** Reads a whole body slowly, hashing each view only after a pause: a reused buffer overwritten early shows. */
async function readSlowly(response: Http1Response): Promise<{ sha: string; pieces: number }> {
  const hash = createHash("sha256");
  let pieces = 0;
  for (let piece = await response.read(); piece !== null; piece = await response.read()) {
    const before = digest(piece);
    if (pieces % 3 === 0) await sleep(2);
    expect(digest(piece)).toBe(before);
    hash.update(piece);
    pieces += 1;
  }
  return { sha: hash.digest("hex"), pieces };
}

/** A server that answers each request with `script(request index)`, written in separate TCP segments. */
async function scriptedServer(
  script: (index: number, socket: Socket) => Promise<void>,
): Promise<{ url: string; connections: () => number; close: () => Promise<void> }> {
  let connections = 0;
  let requests = 0;
  const sockets = new Set<Socket>();
  const server = createTcpServer((socket) => {
    connections += 1;
    sockets.add(socket);
    let pending = "";
    socket.on("data", (data) => {
      pending += data.toString("latin1");
      while (pending.includes("\r\n\r\n")) {
        pending = pending.slice(pending.indexOf("\r\n\r\n") + 4);
        void script(requests++, socket);
      }
    });
    socket.on("error", () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    connections: () => connections,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await close(server);
    },
  };
}

async function send(socket: Socket, ...parts: string[]): Promise<void> {
  for (const part of parts) {
    socket.write(part, "latin1");
    await sleep(5); // separate segments, so framing is split across reads
  }
}

describe("Http1Connection", () => {
  for (const secure of [false, true]) {
    it(`${secure ? "https" : "http"}: a body larger than the receive ring, read slowly, arrives intact`, async () => {
      const handler: RequestListener = (_req, res) => {
        res.writeHead(200, { "content-length": BODY.length }).end(BODY);
      };
      const server = secure ? createHttpsServer(tls, handler) : createHttpServer(handler);
      const url = new URL(`${await listen(server, secure ? "https" : "http")}/big`);
      try {
        const connection = await Http1Connection.open(url, { ...OPTIONS, ca: tls.cert });
        const response = await connection.get(url, {});
        expect(response.status).toBe(200);
        const { sha, pieces } = await readSlowly(response);
        expect(sha).toBe(digest(BODY));
        expect(pieces).toBeGreaterThan(4); // more pieces than ring slots: buffers were reused
        expect(connection.reusable).toBe(true);
        connection.close();
      } finally {
        await close(server);
      }
    });
  }

  for (const secure of [false, true]) {
    it(`${secure ? "https" : "http"}: readInto lands the body in the caller's buffer, then the ring serves the next response`, async () => {
      const handler: RequestListener = (req, res) => {
        const body = req.url === "/small" ? BODY.subarray(0, 1000) : BODY;
        res.writeHead(200, { "content-length": body.length });
        // the head and the body's first bytes in one segment, then the rest in pieces
        res.write(body.subarray(0, 777));
        setTimeout(() => res.end(body.subarray(777)), 5);
      };
      const server = secure ? createHttpsServer(tls, handler) : createHttpServer(handler);
      const url = new URL(`${await listen(server, secure ? "https" : "http")}/big`);
      try {
        const connection = await Http1Connection.open(url, { ...OPTIONS, ca: tls.cert });
        const target = Buffer.alloc(BODY.length + 100, 0xee);
        const response = await connection.get(url, {});
        connection.readInto(target.subarray(0, BODY.length));
        let at = 0;
        let direct = 0;
        for (let piece = await response.read(); piece !== null; piece = await response.read()) {
          if (piece.buffer === target.buffer && piece.byteOffset === target.byteOffset + at)
            direct += piece.length;
          else piece.copy(target, at);
          at += piece.length;
        }
        expect(at).toBe(BODY.length);
        expect(target.subarray(0, BODY.length).equals(BODY)).toBe(true);
        expect(target.subarray(BODY.length).every((byte) => byte === 0xee)).toBe(true); // never past its end
        expect(direct).toBeGreaterThan(BODY.length / 2);
        // the next response is read into the ring again, intact
        const small = new URL("/small", url);
        const next = await connection.get(small, {});
        const { sha } = await readSlowly(next);
        expect(sha).toBe(digest(BODY.subarray(0, 1000)));
        expect(target.subarray(0, BODY.length).equals(BODY)).toBe(true);
        connection.close();
      } finally {
        await close(server);
      }
    });
  }

  it("decodes chunked bodies split across segments (extensions, trailers) and reuses the connection", async () => {
    const server = await scriptedServer(async (index, socket) => {
      const word = index === 0 ? "alpha" : "bravo";
      await send(
        socket,
        "HTTP/1.1 100 Continue\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Index: ",
        `${index}\r\n\r\n5;ext=1\r\n${word.slice(0, 3)}`,
        `${word.slice(3)}\r`,
        "\nA\r\n0123456789\r\n0\r\nX-Trailer: yes\r\n",
        "\r\n",
      );
    });
    try {
      const url = new URL(`${server.url}/chunked`);
      const connection = await Http1Connection.open(url, OPTIONS);
      for (const word of ["alpha", "bravo"]) {
        const response = await connection.get(url, {});
        expect(response.status).toBe(200);
        const parts: Buffer[] = [];
        for (let piece = await response.read(); piece !== null; piece = await response.read()) {
          parts.push(Buffer.from(piece));
        }
        expect(Buffer.concat(parts).toString()).toBe(`${word}0123456789`);
      }
      expect(server.connections()).toBe(1);
      connection.close();
    } finally {
      await server.close();
    }
  });

  it("reads a body without length to the connection's end, and then cannot be reused", async () => {
    const server = await scriptedServer(async (_index, socket) => {
      await send(socket, "HTTP/1.0 200 OK\r\n\r\nuntil ", "close");
      socket.end();
    });
    try {
      const url = new URL(`${server.url}/old`);
      const connection = await Http1Connection.open(url, OPTIONS);
      const response = await connection.get(url, {});
      const parts: Buffer[] = [];
      for (let piece = await response.read(); piece !== null; piece = await response.read()) {
        parts.push(Buffer.from(piece));
      }
      expect(Buffer.concat(parts).toString()).toBe("until close");
      expect(connection.reusable).toBe(false);
      connection.close();
    } finally {
      await server.close();
    }
  });

  it("bytes past a body's Content-Length make the connection unusable rather than a next response", async () => {
    const server = await scriptedServer(async (_index, socket) => {
      await send(socket, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloEXTRA");
    });
    try {
      const url = new URL(`${server.url}/extra`);
      const connection = await Http1Connection.open(url, OPTIONS);
      const response = await connection.get(url, {});
      expect((await response.read())?.toString()).toBe("hello");
      expect(await response.read()).toBeNull();
      expect(connection.reusable).toBe(false);
      connection.close();
    } finally {
      await server.close();
    }
  });

  it("a body cut short is a ConnectionDroppedError; garbage is a clear http_protocol error", async () => {
    const server = await scriptedServer(async (index, socket) => {
      if (index === 0) await send(socket, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", "only ten b");
      else await send(socket, "SSH-2.0-OpenSSH_9.2\r\n\r\n");
      socket.destroy();
    });
    try {
      const url = new URL(`${server.url}/x`);
      const first = await Http1Connection.open(url, OPTIONS);
      const response = await first.get(url, {});
      await expect(readSlowly(response)).rejects.toBeInstanceOf(ConnectionDroppedError);
      first.close();
      const second = await Http1Connection.open(url, OPTIONS);
      const error = await second.get(url, {}).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ImageError);
      expect((error as ImageError).code).toBe("http_protocol");
      expect((error as ImageError).message).toMatch(/not an HTTP\/1\.x response: "SSH-2\.0/);
      second.close();
    } finally {
      await server.close();
    }
  });
});

describe("ImageDownload", () => {
  it("follows redirects (relative and absolute) to the body", async () => {
    const server = createHttpServer((req, res) => {
      if (req.url === "/a") res.writeHead(302, { location: "/b?sig=1" }).end();
      else if (req.url === "/b?sig=1") res.writeHead(307, { location: `http://${req.headers.host}/c` }).end();
      else res.writeHead(200, { "content-length": BODY.length }).end(BODY);
    });
    const base = await listen(server);
    try {
      const download = new ImageDownload(`${base}/a`, OPTIONS);
      const hash = createHash("sha256");
      for await (const chunk of download) hash.update(chunk);
      expect(hash.digest("hex")).toBe(digest(BODY));
      expect(download.received).toBe(BODY.length);
    } finally {
      await close(server);
    }
  });

  it("a download on its own closes its keep-alive connection when done (an idle socket would pin the agent)", async () => {
    const server = createHttpServer((_req, res) => res.writeHead(200, { "content-length": 5 }).end("hello"));
    let open = 0;
    server.on("connection", (socket: Socket) => {
      open += 1;
      socket.on("close", () => (open -= 1));
    });
    const base = await listen(server);
    try {
      for await (const chunk of new ImageDownload(`${base}/small`, OPTIONS)) void chunk;
      // the server sees the client's close when it gets to it: polled for, not given a fixed second
      await waitFor(() => open === 0, { what: "the download's connection to close", timeoutMs: 30_000 });
      expect(open).toBe(0);
    } finally {
      await close(server);
    }
  });

  for (const secure of [false, true]) {
    it(`${secure ? "https" : "http"}: with a landing, the body is read into the writer's blocks in place, across a dropped connection`, async () => {
      const server = await startHttpImageServer(secure ? { tls } : {});
      const source = join(dir, `landing-${secure}.src`);
      const target = join(dir, `landing-${secure}.img`);
      const body = randomBytes(9 * 1024 * 1024 + 4_321);
      await writeFile(source, body);
      await writeFile(target, "");
      server.serve("/image", source, { dropAfterBytes: 5 * 1024 * 1024 + 77 });
      try {
        const writer = await ImageWriter.open({ path: target, readsZeroes: true, blockSize: 1024 * 1024 });
        const download = new ImageDownload(`${server.url}/image`, {
          ...OPTIONS,
          ...(secure ? { ca: tls.cert } : {}),
          retryDelayMs: 1,
        });
        download.landing = () => writer.landing();
        const hash = createHash("sha256");
        let offset = 0;
        let inPlace = 0;
        for await (const chunk of download) {
          const spot = writer.landing();
          if (chunk.buffer === spot.buffer && chunk.byteOffset === spot.byteOffset) inPlace += chunk.length;
          hash.update(chunk);
          // a slow consumer: the socket reads ahead into the block, never over what is not consumed yet
          if (offset % 3 === 0) await sleep(1);
          await writer.write({ offset, data: chunk });
          offset += chunk.length;
        }
        await writer.finish(offset);
        expect(download.resumes).toBe(1);
        expect(hash.digest("hex")).toBe(digest(body));
        expect((await readFile(target)).equals(body)).toBe(true);
        // what the ring had read ahead when a block began is copied; the rest landed in place
        expect(inPlace).toBeGreaterThan(0);
      } finally {
        await server.close();
      }
    });
  }

  it("a redirect loop ends in a clear error, not a hang", async () => {
    const server = createHttpServer((_req, res) => res.writeHead(302, { location: "/again" }).end());
    const base = await listen(server);
    try {
      const consume = async (): Promise<void> => {
        for await (const chunk of new ImageDownload(`${base}/loop`, OPTIONS)) void chunk;
      };
      await expect(consume()).rejects.toThrow(/redirected more than 5 times/);
    } finally {
      await close(server);
    }
  });
});
