import { createHash, randomBytes } from "node:crypto";
import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import { ChunkCache, ChunkPool, HeldChunk } from "../../agent/swarm/chunk-cache.ts";
import { PeerConnections, PeerFetchError, fetchFromPeer } from "../../agent/swarm/peer-fetch.ts";
import { chunkPath } from "../../shared/swarm.ts";

describe("swarm chunk buffers: pooled, reused only once nobody reads them", () => {
  it("a chunk evicted while leased to an upload goes back to the pool only when the lease ends", () => {
    const pool = new ChunkPool(8);
    const buffer = pool.take();
    const chunk = new HeldChunk([buffer], () => pool.give(buffer));
    const cache = new ChunkCache(8);
    cache.put(0, chunk);
    chunk.release(); // the pipeline is done with it: the cache holds it now
    const lease = cache.lease(0);
    cache.put(1, [Buffer.alloc(8)]); // evicts chunk 0 while it is uploading
    expect(cache.has(0)).toBe(false);
    expect(pool.take()).not.toBe(buffer);
    lease?.release();
    lease?.release(); // twice is once
    expect(pool.take()).toBe(buffer);
    expect(pool.take()).not.toBe(buffer);
  });

  it("every reference released, in any order, frees the buffer exactly once", () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom("lease", "put", "evict", "clear"), { maxLength: 30 }), (steps) => {
        let freed = 0;
        const chunk = new HeldChunk([Buffer.alloc(4)], () => (freed += 1));
        const cache = new ChunkCache(4);
        const leases: Array<() => void> = [];
        for (const step of steps) {
          if (step === "lease") {
            const lease = cache.lease(0);
            if (lease) leases.push(lease.release);
          } else if (step === "put") cache.put(0, chunk);
          else if (step === "evict") cache.put(1, [Buffer.alloc(4)]);
          else cache.clear();
          expect(freed).toBe(0); // the caller's own reference is still held
        }
        cache.clear();
        for (const release of leases) release();
        chunk.release();
        expect(freed).toBe(1);
      }),
    );
  });
});

describe("swarm peer fetches on kept-alive connections", () => {
  const closers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const close of closers.splice(0)) await close();
  });

  /** A peer serving `chunk` as chunk 0 of wave "w"; `cutSecond` cuts a connection at its second request. */
  async function peer(
    chunk: Buffer,
    cutSecond?: "end" | "reset",
  ): Promise<{ url: string; connections: () => number }> {
    let connections = 0;
    const requests = new WeakMap<Socket, number>();
    const server = createServer((req, res) => {
      const socket = req.socket;
      const count = (requests.get(socket) ?? 0) + 1;
      requests.set(socket, count);
      if (cutSecond !== undefined && count === 2) {
        // as when the peer closed the idle connection just as the request came: a FIN, or a reset
        if (cutSecond === "reset") socket.resetAndDestroy();
        else socket.destroy();
        return;
      }
      if (req.url !== chunkPath("w", 0)) return res.writeHead(404, { "content-length": 0 }).end();
      res.writeHead(200, { "content-length": chunk.length }).end(chunk);
    });
    server.on("connection", () => (connections += 1));
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    closers.push(async () => {
      server.closeAllConnections();
      await new Promise((done) => server.close(done));
    });
    const { port } = server.address() as AddressInfo;
    return { url: `http://127.0.0.1:${port}/`, connections: () => connections };
  }

  const fetchOptions = (url: string, pool: PeerConnections, into: Buffer) => ({
    url,
    wave: "w",
    token: "t".repeat(43),
    index: 0,
    length: 100_000,
    stallMs: 5_000,
    connections: pool,
    into,
  });

  it("reuses one connection per peer, and bytes and hash are the peer's", async () => {
    const chunk = randomBytes(100_000);
    const { url, connections } = await peer(chunk);
    const pool = new PeerConnections();
    closers.push(async () => pool.close());
    for (let i = 0; i < 3; i++) {
      const into = Buffer.alloc(200_000);
      const got = await fetchFromPeer(fetchOptions(url, pool, into));
      expect(got.data.equals(chunk)).toBe(true);
      expect(got.data.buffer).toBe(into.buffer);
      expect(got.sha256).toBe(createHash("sha256").update(chunk).digest("hex"));
    }
    expect(connections()).toBe(1);
    // a refusal's connection is kept too
    await expect(
      fetchFromPeer({ ...fetchOptions(url, pool, Buffer.alloc(200_000)), index: 1 }),
    ).rejects.toMatchObject({
      failure: "missing",
    });
    expect(connections()).toBe(1);
  });

  for (const cut of ["end", "reset"] as const)
    it(`a kept-alive connection the peer cut (${cut}) before answering is dialled again, not the peer's failure`, async () => {
      const chunk = randomBytes(100_000);
      const { url, connections } = await peer(chunk, cut);
      const pool = new PeerConnections();
      closers.push(async () => pool.close());
      for (let i = 0; i < 2; i++) {
        const got = await fetchFromPeer(fetchOptions(url, pool, Buffer.alloc(100_000)));
        expect(got.data.equals(chunk)).toBe(true);
      }
      expect(connections()).toBe(2);
    });

  it("a fresh connection cut before its answer is the peer's failure", async () => {
    const server = createServer((req) => req.socket.destroy());
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    closers.push(async () => {
      server.closeAllConnections();
      await new Promise((done) => server.close(done));
    });
    const pool = new PeerConnections();
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    const error: unknown = await fetchFromPeer(fetchOptions(url, pool, Buffer.alloc(100_000))).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(PeerFetchError);
    expect((error as PeerFetchError).failure).toBe("unreachable");
  });
});
