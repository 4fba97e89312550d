import { createHash, randomBytes } from "node:crypto";
import { once } from "node:events";
import { createServer } from "node:net";
import type { AddressInfo, Server, Socket } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PeerConnections, PeerFetchError, fetchFromPeer } from "../../agent/swarm/peer-fetch.ts";
import type { PeerChunk } from "../../agent/swarm/peer-fetch.ts";

/** How a hostile (or broken) peer answers one chunk request. */
interface Shape {
  status: number;
  /** 100 Continue heads before the answer. */
  informational: number;
  length: "exact" | "missing" | "short" | "long" | "huge" | "overflow" | "garbage" | "double";
  chunked: boolean;
  junk: string[];
  /** trickle: a few bytes every STALL_MS / 3, never silent long enough to stall, never done. */
  body: "right" | "wrong" | "cut" | "stall" | "empty" | "trickle";
  extra: number;
  /** The body sent in this many writes, `gapMs` apart (never a gap near the stall bound). */
  drip: { pieces: number; gapMs: number } | null;
  close: boolean;
}

const STALL_MS = 120;
/**
 * Liveness bound per fetch: the chunk's deadline (3 × STALL_MS) plus the drip's gaps, with a wide margin for a
 * loaded machine. A trickling peer would otherwise hold the fetch for its whole body.
 */
const SETTLE_BOUND_MS = 3_000;
const GUARD = 4096;

const shapeArb: fc.Arbitrary<Shape> = fc.record({
  status: fc.constantFrom(200, 200, 200, 200, 206, 204, 301, 404, 500, 503, 101),
  informational: fc.constantFrom(0, 0, 0, 1, 3, 9),
  length: fc.constantFrom(
    "exact",
    "exact",
    "exact",
    "missing",
    "short",
    "long",
    "huge",
    "overflow",
    "garbage",
    "double",
  ),
  chunked: fc.constantFrom(false, false, false, true),
  junk: fc.array(
    fc.oneof(
      fc.constantFrom(
        "X-Fine: yes",
        "no colon here",
        " folded: line",
        "Bad Name: x",
        "X-Nul: a\u0000b",
        "Connection: close",
        `X-Long: ${"a".repeat(70_000)}`,
        "Transfer-Encoding: gzip",
        "Content-Encoding: gzip",
      ),
      fc.string({ maxLength: 40 }),
    ),
    { maxLength: 3 },
  ),
  body: fc.constantFrom("right", "right", "right", "wrong", "cut", "stall", "empty", "trickle"),
  extra: fc.constantFrom(0, 0, 0, 1, 7, 5000),
  drip: fc.option(
    fc.record({ pieces: fc.integer({ min: 2, max: 6 }), gapMs: fc.integer({ min: 1, max: 30 }) }),
    {
      nil: null,
    },
  ),
  close: fc.boolean(),
});

const WELL_FORMED: Shape = {
  status: 200,
  informational: 0,
  length: "exact",
  chunked: false,
  junk: [],
  body: "right",
  extra: 0,
  drip: null,
  close: false,
};

/** A shape a correct peer could send: the fetch must then give the chunk. */
function wellFormed(shape: Shape): boolean {
  return (
    shape.status === 200 &&
    shape.informational <= 3 &&
    shape.length === "exact" &&
    !shape.chunked &&
    shape.junk.length === 0 &&
    shape.body === "right" &&
    shape.extra === 0
  );
}

function contentLength(shape: Shape, length: number): string[] {
  switch (shape.length) {
    case "exact":
      return [`Content-Length: ${length}`];
    case "missing":
      return [];
    case "short":
      return [`Content-Length: ${length - 1}`];
    case "long":
      return [`Content-Length: ${length + 1}`];
    case "huge":
      return [`Content-Length: 999999999999999`];
    case "overflow":
      return [`Content-Length: 99999999999999999999999`];
    case "garbage":
      return [`Content-Length: ${length}abc`];
    case "double":
      return [`Content-Length: ${length}`, `Content-Length: ${length + 1}`];
  }
}

/** The bytes to put on the wire after the head, and whether to stop (stall) or cut the connection after. */
function bodyBytes(shape: Shape, chunk: Buffer): { bytes: Buffer; then: "keep" | "cut" | "stall" } {
  const wrong = Buffer.from(chunk);
  if (wrong.length > 0) wrong[wrong.length >> 1] = (wrong[wrong.length >> 1] as number) ^ 1;
  let body =
    shape.body === "wrong"
      ? wrong
      : shape.body === "empty"
        ? Buffer.alloc(0)
        : shape.body === "cut" || shape.body === "stall"
          ? chunk.subarray(0, chunk.length >> 1)
          : chunk;
  const then = shape.body === "cut" ? "cut" : shape.body === "stall" ? "stall" : "keep";
  if (shape.chunked) {
    const parts: Buffer[] = [];
    for (let at = 0; at < body.length; at += 10_000) {
      const piece = body.subarray(at, at + 10_000);
      parts.push(Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from("\r\n"));
    }
    if (then === "keep") parts.push(Buffer.from("0\r\n\r\n"));
    body = Buffer.concat(parts);
  }
  return { bytes: Buffer.concat([body, randomBytes(shape.extra)]), then };
}

/**
 * A raw TCP peer: answers each request it reads with the next shape of the queue (a well-formed answer once
 * the queue is empty), on kept-alive connections unless a shape closes them.
 */
class HostilePeer {
  readonly queue: Shape[] = [];
  private readonly sockets = new Set<Socket>();
  private readonly server: Server;
  chunk = Buffer.alloc(0);

  constructor() {
    this.server = createServer((socket) => this.serve(socket));
  }

  async listen(): Promise<string> {
    this.server.listen(0, "127.0.0.1");
    await once(this.server, "listening");
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/`;
  }

  /** Cuts every connection (between property runs). */
  reset(): void {
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
    this.queue.length = 0;
  }

  async close(): Promise<void> {
    this.reset();
    await new Promise((done) => this.server.close(done));
  }

  private serve(socket: Socket): void {
    this.sockets.add(socket);
    socket.on("close", () => this.sockets.delete(socket));
    socket.on("error", () => undefined);
    let pending = "";
    let busy = Promise.resolve();
    socket.on("data", (data: Buffer) => {
      pending += data.toString("latin1");
      for (let end = pending.indexOf("\r\n\r\n"); end >= 0; end = pending.indexOf("\r\n\r\n")) {
        pending = pending.slice(end + 4);
        const shape = this.queue.shift();
        busy = busy.then(() => this.answer(socket, shape));
      }
    });
  }

  private async answer(socket: Socket, shape: Shape | undefined): Promise<void> {
    if (socket.destroyed) return;
    if (shape === undefined) {
      socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${this.chunk.length}\r\n\r\n`);
      socket.write(this.chunk);
      return;
    }
    const head = [
      ...Array.from({ length: shape.informational }, () => "HTTP/1.1 100 Continue\r\n\r\n"),
      `HTTP/1.1 ${shape.status} Whatever\r\n`,
      ...contentLength(shape, this.chunk.length).map((line) => `${line}\r\n`),
      ...(shape.chunked ? ["Transfer-Encoding: chunked\r\n"] : []),
      ...(shape.close ? ["Connection: close\r\n"] : []),
      ...shape.junk.map((line) => `${line}\r\n`),
      "\r\n",
    ].join("");
    socket.write(Buffer.from(head, "latin1"));
    if (shape.body === "trickle") {
      while (!socket.destroyed) {
        socket.write(randomBytes(16));
        await sleep(STALL_MS / 3);
      }
      return;
    }
    const { bytes, then } = bodyBytes(shape, this.chunk);
    const pieces = shape.drip?.pieces ?? 1;
    const step = Math.ceil(bytes.length / pieces) || 1;
    for (let at = 0; at < bytes.length; at += step) {
      if (at > 0 && shape.drip) await sleep(shape.drip.gapMs);
      if (socket.destroyed) return;
      socket.write(bytes.subarray(at, at + step));
    }
    if (then === "cut") socket.destroy();
    else if (shape.close) socket.end();
    // "stall": nothing more, the connection left open
  }
}

type Settled = { kind: "ok"; chunk: PeerChunk } | { kind: "error"; error: unknown } | { kind: "hung" };

async function settleWithin(promise: Promise<PeerChunk>, ms: number): Promise<Settled> {
  const watchdog = new AbortController();
  const hung = sleep(ms, { kind: "hung" } as const, { signal: watchdog.signal }).catch(
    () => ({ kind: "hung" }) as const,
  );
  try {
    return await Promise.race([
      promise.then(
        (chunk) => ({ kind: "ok", chunk }) as const,
        (error: unknown) => ({ kind: "error", error }) as const,
      ),
      hung,
    ]);
  } finally {
    watchdog.abort();
  }
}

describe("fetchFromPeer against hostile peers (generated answers over loopback)", () => {
  const peer = new HostilePeer();
  let url: string;

  beforeAll(async () => {
    url = await peer.listen();
  });
  afterAll(async () => {
    await peer.close();
  });

  it("never throws outside PeerFetchError, never writes past its buffer, always settles, and gives only honest bytes", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 96 * 1024 }),
        fc.array(shapeArb, { minLength: 1, maxLength: 2 }),
        async (length, shapes) => {
          peer.reset();
          peer.chunk = randomBytes(length);
          peer.queue.push(...shapes);
          const anchor = createHash("sha256").update(peer.chunk).digest("hex");
          const connections = new PeerConnections();
          try {
            // two requests on one pool: what a hostile answer leaves on a kept-alive connection must not
            // become the next chunk
            for (const [i, shape] of [...shapes, undefined].entries()) {
              const into = Buffer.alloc(length + GUARD, 0xa5);
              const outcome = await settleWithin(
                fetchFromPeer({
                  url,
                  wave: "w",
                  token: "t".repeat(43),
                  index: i,
                  length,
                  stallMs: STALL_MS,
                  connections,
                  into,
                }),
                SETTLE_BOUND_MS,
              );
              expect(outcome.kind).not.toBe("hung");
              expect(into.subarray(length).every((byte) => byte === 0xa5)).toBe(true);
              if (outcome.kind === "error") {
                expect(outcome.error).toBeInstanceOf(PeerFetchError);
                // a correct answer on a fresh or reused connection is never refused
                if (shape !== undefined && wellFormed(shape) && i === 0) throw outcome.error;
                continue;
              }
              if (outcome.kind !== "ok") continue;
              const { data, sha256 } = outcome.chunk;
              // the caller accepts a chunk only if sha256 is its anchor: it must be the returned bytes' hash
              expect(data.length).toBe(length);
              expect(data.buffer).toBe(into.buffer);
              expect(data.byteOffset).toBe(into.byteOffset);
              expect(createHash("sha256").update(data).digest("hex")).toBe(sha256);
              if (sha256 === anchor) expect(data.equals(peer.chunk)).toBe(true);
              if (shape !== undefined && shape.body !== "right") expect(sha256).not.toBe(anchor);
              if (shape !== undefined && wellFormed(shape)) expect(sha256).toBe(anchor);
            }
          } finally {
            connections.close();
          }
        },
      ),
      {
        numRuns: 120,
        examples: [
          // a chunked body shorter than the Content-Length it also declares
          [1000, [{ ...WELL_FORMED, chunked: true, body: "empty" }]],
          [1000, [{ ...WELL_FORMED, chunked: true, body: "cut" }]],
          [70_000, [{ ...WELL_FORMED, chunked: true }, WELL_FORMED]],
          // bytes now and then, forever: only the chunk's deadline ends it
          [90_000, [{ ...WELL_FORMED, body: "trickle" }]],
        ],
      },
    );
  }, 60_000);
});
