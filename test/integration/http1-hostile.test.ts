import { mkdtemp, rm } from "node:fs/promises";
import { createServer as createHttpServer } from "node:http";
import type { Server } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import { createServer as createTcpServer } from "node:net";
import type { AddressInfo, Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ImageError } from "../../agent/image/errors.ts";
import { ImageDownload, redirectTarget } from "../../agent/image/fetch.ts";
import { ConnectionDroppedError, Http1Connection } from "../../agent/image/http1.ts";
import { selfSignedCert } from "../helpers/tls.ts";

/** Short bounds, so a hostile server costs milliseconds; every run must end well inside HANG_MS. */
const OPTIONS = { connectTimeoutMs: 1_000, stallTimeoutMs: 200, headersTimeoutMs: 400 };
const HANG_MS = 5_000;

/** What one connection to the scripted server receives: segments (written apart), then close or hold. */
interface Script {
  segments: Buffer[];
  /** Keep the socket open after the last segment (the client must time out). */
  hold: boolean;
  /** Pause between segments. Default 1 ms. */
  delayMs?: number;
}

/** A raw TCP server on 127.0.0.1 that answers each connection's request with the next queued script. */
async function scriptedServer(): Promise<{
  url: string;
  queue: Script[];
  close: () => Promise<void>;
}> {
  const queue: Script[] = [];
  const sockets = new Set<Socket>();
  const server = createTcpServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => undefined);
    const script = queue.shift() ?? { segments: [], hold: false };
    let request = "";
    const onData = (data: Buffer): void => {
      request += data.toString("latin1");
      if (!request.includes("\r\n\r\n")) return;
      socket.off("data", onData);
      void (async () => {
        for (const segment of script.segments) {
          if (socket.destroyed) return;
          socket.write(segment);
          await sleep(script.delayMs ?? 1);
        }
        if (!script.hold) socket.end();
      })();
    };
    socket.on("data", onData);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    queue,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** GET and read the whole body; the outcome, or the error, within HANG_MS (else the test fails: a hang). */
async function exchange(url: string): Promise<{ body?: Buffer; status?: number; error?: unknown }> {
  const target = new URL(`${url}/image`);
  let connection: Http1Connection | undefined;
  const work = (async () => {
    connection = await Http1Connection.open(target, OPTIONS);
    const response = await connection.get(target, {});
    const parts: Buffer[] = [];
    for (let piece = await response.read(); piece !== null; piece = await response.read()) {
      parts.push(Buffer.from(piece));
    }
    return { body: Buffer.concat(parts), status: response.status };
  })().catch((error: unknown) => ({ error }));
  const hang = sleep(HANG_MS).then(() => ({ error: new Error("HUNG: no outcome within the bound") }));
  try {
    return await Promise.race([work, hang]);
  } finally {
    connection?.close();
  }
}

function splitAt(bytes: Buffer, points: number[]): Buffer[] {
  const cuts = [...new Set(points.map((p) => Math.floor(p * bytes.length)))].sort((a, b) => a - b);
  const parts: Buffer[] = [];
  let at = 0;
  for (const cut of cuts) {
    if (cut > at && cut < bytes.length) {
      parts.push(bytes.subarray(at, cut));
      at = cut;
    }
  }
  parts.push(bytes.subarray(at));
  return parts;
}

const token = fc.stringMatching(/^[A-Za-z][A-Za-z0-9-]{0,15}$/);
const safeValue = fc.stringMatching(/^[ -~]{0,40}$/).map((v) => v.trim());
const chunkExtension = fc.oneof(
  fc.constant(""),
  token.map((t) => `;${t}`),
  fc.tuple(token, token).map(([a, b]) => `;${a}=${b}`),
  fc.tuple(token, safeValue).map(([a, b]) => `;${a}="${b.replace(/["\\]/g, "")}"`),
);

/** A valid response: 1xx preludes, headers, a body framed by length, chunks (sizes, extensions, trailers) or close. */
const validReply = fc
  .record({
    informational: fc.array(
      fc.constantFrom("100 Continue", "102 Processing", "103 Early Hints", "199 Whatever"),
      {
        maxLength: 3,
      },
    ),
    headers: fc.array(fc.tuple(token, safeValue), { maxLength: 6 }),
    framing: fc.constantFrom("length" as const, "chunked" as const, "close" as const),
    body: fc.uint8Array({ maxLength: 3000 }).map((b) => Buffer.from(b)),
    chunkCuts: fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 6 }),
    extensions: fc.array(chunkExtension, { minLength: 8, maxLength: 8 }),
    trailers: fc.array(fc.tuple(token, safeValue), { maxLength: 4 }),
    upperHex: fc.boolean(),
    reason: fc.constantFrom(" OK", " ", "", " Fine Thanks"),
    splits: fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 5 }),
  })
  .map((r) => {
    const lines: string[] = [];
    for (const info of r.informational) lines.push(`HTTP/1.1 ${info}\r\nX-Info: 1\r\n\r\n`);
    const fields = r.headers
      .filter(([name]) => !/^(content-length|transfer-encoding|connection)$/i.test(name))
      .map(([n, v]) => `${n}: ${v}\r\n`)
      .join("");
    let framingHeader = "";
    let body: Buffer;
    if (r.framing === "length") {
      framingHeader = `Content-Length: ${r.body.length}\r\n`;
      body = r.body;
    } else if (r.framing === "chunked") {
      framingHeader = "Transfer-Encoding: chunked\r\n";
      const parts = splitAt(r.body, r.chunkCuts).filter((p) => p.length > 0);
      const encoded: Buffer[] = parts.map((p, i) => {
        const size = p.length.toString(16);
        return Buffer.concat([
          Buffer.from(`${r.upperHex ? size.toUpperCase() : size}${r.extensions[i % 8] ?? ""}\r\n`),
          p,
          Buffer.from("\r\n"),
        ]);
      });
      const trailers = r.trailers.map(([n, v]) => `${n}: ${v}\r\n`).join("");
      encoded.push(Buffer.from(`0${r.extensions[7] ?? ""}\r\n${trailers}\r\n`));
      body = Buffer.concat(encoded);
    } else {
      framingHeader = "Connection: close\r\n";
      body = r.body;
    }
    const head = `${lines.join("")}HTTP/1.1 200${r.reason}\r\n${fields}${framingHeader}\r\n`;
    const bytes = Buffer.concat([Buffer.from(head, "latin1"), body]);
    return { bytes: splitAt(bytes, r.splits), expected: r.body };
  });

/** Hostile shapes, each of which must end in a typed error (never a body, a crash or a hang). */
const mustFail = fc.oneof(
  fc
    .constantFrom("099", "000", "600", "999", "2000", "20", "2O0", "-200", "+200", " 200", "200\t")
    .map((code) => ({ kind: "status", bytes: `HTTP/1.1 ${code} OK\r\nContent-Length: 2\r\n\r\nhi` })),
  fc
    .integer({ min: 9, max: 2000 })
    .map((n) => ({ kind: "1xx flood", bytes: "HTTP/1.1 100 Continue\r\n\r\n".repeat(n) })),
  fc.constant({ kind: "101", bytes: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\nraw bytes" }),
  fc.integer({ min: 65, max: 400 }).map((n) => ({
    kind: "trailer flood",
    bytes: `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n${"T: x\r\n".repeat(n)}\r\n`,
  })),
  fc.integer({ min: 129, max: 3000 }).map((n) => ({
    kind: "header lines",
    bytes: `HTTP/1.1 200 OK\r\n${"A: b\r\n".repeat(n)}Content-Length: 0\r\n\r\n`,
  })),
  fc.constant({ kind: "header bytes", bytes: `HTTP/1.1 200 OK\r\nBig: ${"x".repeat(70_000)}\r\n\r\n` }),
  fc.constantFrom("zz", "-1", "1ffffffffffff0", "", " ", "0x10", "1;\n").map((size) => ({
    kind: "chunk size",
    bytes: `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n${size}\r\nabc\r\n0\r\n\r\n`,
  })),
  fc.constant({
    kind: "chunk CRLF",
    bytes: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXY0\r\n\r\n",
  }),
  fc.constant({
    kind: "chunk line",
    bytes: `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;${"e".repeat(5000)}\r\n`,
  }),
  fc.constantFrom("gzip", "chunked, gzip", "identity").map((te) => ({
    kind: "transfer-encoding",
    bytes: `HTTP/1.1 200 OK\r\nTransfer-Encoding: ${te}\r\n\r\n0\r\n\r\n`,
  })),
  fc.constantFrom("-1", "1e3", "5, 6", "99999999999999999999", "0x5").map((length) => ({
    kind: "content-length",
    bytes: `HTTP/1.1 200 OK\r\nContent-Length: ${length}\r\n\r\nhello`,
  })),
  fc.constantFrom(" folded: x", "no colon", ": empty name", "bad name: x", "X: a\rb").map((line) => ({
    kind: "header line",
    bytes: `HTTP/1.1 200 OK\r\nA: b\r\n${line}\r\nContent-Length: 0\r\n\r\n`,
  })),
  fc.constant({ kind: "short body", bytes: "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this" }),
  fc.constant({ kind: "not http", bytes: "SSH-2.0-OpenSSH_9.2\r\n\r\n" }),
  fc.constant({ kind: "empty", bytes: "" }),
);

/** Shapes that stall with the socket held open: headers never end, trailers never end, 1xx trickle. */
const mustTimeOut = fc.constantFrom(
  { kind: "stalled head", bytes: "HTTP/1.1 200 OK\r\nContent-Le" },
  { kind: "stalled body", bytes: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc" },
  {
    kind: "stalled trailers",
    bytes: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\nT: 1\r\n",
  },
);

const counts: Record<string, number> = {};
const count = (key: string): void => {
  counts[key] = (counts[key] ?? 0) + 1;
};

afterAll(() => {
  console.log(`http1 fuzz runs: ${JSON.stringify(counts)}`);
});

describe("the image HTTP reader against a hostile server (fast-check, real TCP on 127.0.0.1)", () => {
  let server: Awaited<ReturnType<typeof scriptedServer>>;
  beforeAll(async () => {
    server = await scriptedServer();
  });
  afterAll(async () => {
    await server.close();
  });

  it("property: valid framing (1xx, chunk sizes, extensions, trailers, split anywhere) yields exactly the body", async () => {
    await fc.assert(
      fc.asyncProperty(validReply, async ({ bytes, expected }) => {
        count("valid");
        server.queue.push({ segments: bytes, hold: false });
        const outcome = await exchange(server.url);
        expect(outcome.error).toBeUndefined();
        expect(outcome.status).toBe(200);
        expect(outcome.body?.equals(expected)).toBe(true);
      }),
      { numRuns: 250 },
    );
  }, 120_000);

  it("property: hostile heads and framing end in a typed error, split anywhere", async () => {
    await fc.assert(
      fc.asyncProperty(
        mustFail,
        fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 4 }),
        async (hostile, splits) => {
          count(`hostile: ${hostile.kind}`);
          server.queue.push({ segments: splitAt(Buffer.from(hostile.bytes, "latin1"), splits), hold: false });
          const outcome = await exchange(server.url);
          expect(outcome.error, `${hostile.kind} gave a body`).toBeDefined();
          expect(
            outcome.error instanceof ImageError || outcome.error instanceof ConnectionDroppedError,
            String(outcome.error),
          ).toBe(true);
        },
      ),
      { numRuns: 200 },
    );
  }, 120_000);

  it("property: random bytes and mutated valid replies never crash or hang; failures are typed", async () => {
    const mutated = fc
      .tuple(
        validReply,
        fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 4 }),
        fc.boolean(),
      )
      .map(([reply, flips, hold]) => {
        const bytes = Buffer.concat(reply.bytes);
        for (const [at, value] of flips) if (bytes.length > 0) bytes[at % bytes.length] = value;
        return { segments: [bytes], hold };
      });
    const noise = fc.tuple(fc.uint8Array({ maxLength: 600 }), fc.boolean()).map(([b, hold]) => ({
      segments: [Buffer.concat([Buffer.from("HTTP/1.1 200 OK\r\n"), Buffer.from(b)])],
      hold,
    }));
    await fc.assert(
      fc.asyncProperty(fc.oneof(mutated, noise), async (script) => {
        count(script.hold ? "mutated (held open)" : "mutated");
        server.queue.push(script);
        const outcome = await exchange(server.url);
        if (outcome.error !== undefined) {
          expect(String(outcome.error)).not.toMatch(/HUNG/);
          expect(
            outcome.error instanceof ImageError || outcome.error instanceof ConnectionDroppedError,
            String(outcome.error),
          ).toBe(true);
        }
      }),
      { numRuns: 200 },
    );
  }, 180_000);

  it("a server that holds the socket open mid-head, mid-body or mid-trailers times out as http_stall", async () => {
    await fc.assert(
      fc.asyncProperty(mustTimeOut, async (stall) => {
        count(`timeout: ${stall.kind}`);
        server.queue.push({ segments: [Buffer.from(stall.bytes)], hold: true });
        const outcome = await exchange(server.url);
        expect(outcome.error).toBeInstanceOf(ImageError);
        expect((outcome.error as ImageError).code).toBe("http_stall");
      }),
      { numRuns: 9 },
    );
  }, 60_000);

  it("endless 100 Continue and endless trailer lines, trickled faster than the stall timeout, end at the phase bound", async () => {
    for (const [kind, head, line] of [
      ["1xx trickle", "", "HTTP/1.1 100 Continue\r\n\r\n"],
      ["trailer trickle", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n", "T: x\r\n"],
    ] as const) {
      // A byte every 40 ms: the stall timeout (200 ms) never fires; the phase bound (400 ms) must.
      const trickle = Buffer.from(line.repeat(40), "latin1");
      const segments = [Buffer.from(head), ...Array.from(trickle, (byte) => Buffer.from([byte]))];
      server.queue.push({ segments, hold: true, delayMs: 40 });
      const outcome = await exchange(server.url);
      count(kind);
      expect(outcome.error).toBeInstanceOf(ImageError);
      expect((outcome.error as ImageError).message).toMatch(/took longer than 400 ms/);
    }
  }, 30_000);
});

describe("status and redirect rules", () => {
  let dir: string;
  let tls: { key: string; cert: string };
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "anvil-http1-hostile-"));
    tls = await selfSignedCert(dir);
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function listen(server: Server, scheme: string): Promise<string> {
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return `${scheme}://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }
  async function close(server: Server): Promise<void> {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
  async function consume(url: string, ca?: string): Promise<Buffer> {
    const parts: Buffer[] = [];
    for await (const chunk of new ImageDownload(url, { ...OPTIONS, ca, maxRetries: 0 }))
      parts.push(Buffer.from(chunk));
    return Buffer.concat(parts);
  }

  it("only 200 and 206 carry an image: 203, 204 and 226 fail with their status", async () => {
    const server = createHttpServer((req, res) => {
      res
        .writeHead(Number(req.url?.slice(1)), { "content-length": 2 })
        .end(req.url === "/204" ? undefined : "hi");
    });
    const base = await listen(server, "http");
    try {
      for (const status of [203, 204, 226]) {
        await expect(consume(`${base}/${status}`)).rejects.toMatchObject({ code: "http_status", status });
      }
      expect((await consume(`${base}/200`)).toString()).toBe("hi");
    } finally {
      await close(server);
    }
  });

  it("a redirect may not leave HTTP nor downgrade TLS; Location is resolved against the answering URL", async () => {
    const plain = createHttpServer((_req, res) => res.writeHead(200, { "content-length": 5 }).end("plain"));
    const plainBase = await listen(plain, "http");
    const secure = createHttpsServer(tls, (req, res) => {
      if (req.url === "/down") res.writeHead(302, { location: `${plainBase}/x` }).end();
      else if (req.url === "/file") res.writeHead(302, { location: "file:///etc/shadow" }).end();
      else if (req.url === "/rel") res.writeHead(301, { location: "../ok#frag" }).end();
      else res.writeHead(200, { "content-length": 6 }).end("secure");
    });
    const secureBase = await listen(secure, "https");
    try {
      await expect(consume(`${secureBase}/down`, tls.cert)).rejects.toThrow(
        /from https: to http:, which is refused/,
      );
      await expect(consume(`${secureBase}/file`, tls.cert)).rejects.toThrow(/to file:, which is refused/);
      expect((await consume(`${secureBase}/a/rel`, tls.cert)).toString()).toBe("secure");
    } finally {
      await close(plain);
      await close(secure);
    }
  });

  it("redirectTarget: property over generated Locations, only http(s) targets without credentials come out", () => {
    let runs = 0;
    const location = fc.oneof(
      fc.webUrl({ withFragments: true, withQueryParameters: true }),
      fc.constantFrom(
        "javascript:alert(1)",
        "data:,x",
        "ftp://h/x",
        "//evil/x",
        "\\\\evil\\x",
        "http://u:p@h/",
        "gopher://h",
        "  http://h/x  ",
        "http://[::1]:1/x",
        "file:/x",
        "HTTPS://H/X",
      ),
      fc.string({ maxLength: 60 }),
    );
    fc.assert(
      fc.property(
        location,
        fc.constantFrom("http://127.0.0.1/a/b?sig=1", "https://127.0.0.1/a/b?sig=1"),
        (loc, from) => {
          runs += 1;
          const base = new URL(from);
          try {
            const to = redirectTarget(base, loc);
            expect(["http:", "https:"]).toContain(to.protocol);
            if (base.protocol === "https:") expect(to.protocol).toBe("https:");
            expect(to.username + to.password).toBe("");
            expect(to.hash).toBe("");
          } catch (error) {
            expect(error).toBeInstanceOf(ImageError);
          }
        },
      ),
      { numRuns: 1000 },
    );
    counts["redirect locations"] = runs;
  });
});
