import { createHash, randomBytes } from "node:crypto";
import { once } from "node:events";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer as createTlsServer } from "node:tls";
import fc from "fast-check";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Http1Connection } from "../../agent/image/http1.ts";
import { ChunkCache } from "../../agent/swarm/chunk-cache.ts";
import { PeerConnections, fetchFromPeer } from "../../agent/swarm/peer-fetch.ts";
import { PeerServer } from "../../agent/swarm/peer-server.ts";
import { peerClientTls, peerKey, peerServerTls } from "../../agent/swarm/peer-tls.ts";
import { handleSwarmFrame } from "../../conductor/agents/swarm-frames.ts";
import { SwarmTracker } from "../../conductor/agents/swarm-tracker.ts";
import { makeLabCa } from "../../conductor/tls/lab-ca.ts";
import { silentLogger } from "../../shared/log.ts";
import type { OutgoingFrame } from "../../shared/protocol.ts";
import { PeerEndpointSchema, chunkPath, peerEndpointScheme } from "../../shared/swarm.ts";

const WAVE = "wave-1";
const TOKEN = "t".repeat(43);
const CHUNK_BYTES = 1024 * 1024;

describe("peer endpoints (outside input: an agent's swarm_join)", () => {
  const address = fc.oneof(
    fc.ipV4(),
    fc.ipV6().map((a) => `[${a}]`),
  );

  it("accepts http:// and https:// ADDRESS:PORT/ and says which", () => {
    fc.assert(
      fc.property(
        fc.constantFrom("http", "https"),
        address,
        fc.integer({ min: 1, max: 65535 }),
        (scheme, host, port) => {
          const text = `${scheme}://${host}:${port}/`;
          expect(peerEndpointScheme(text)).toBe(scheme);
          expect(PeerEndpointSchema.safeParse(text).success).toBe(true);
        },
      ),
    );
  });

  it("never throws, and what it accepts is an http(s) origin with nothing else", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string({ maxLength: 300 }),
          fc.webUrl({ withQueryParameters: true, withFragments: true }),
        ),
        (text) => {
          const scheme = peerEndpointScheme(text);
          expect(PeerEndpointSchema.safeParse(text).success).toBe(scheme !== null);
          if (scheme === null) return;
          const url = new URL(text);
          expect(url.protocol).toBe(`${scheme}:`);
          expect(`${url.origin}/`).toBe(url.href);
        },
      ),
    );
    for (const bad of [
      "ftp://127.0.0.1:1/",
      "https://u:p@127.0.0.1:1/",
      "https://127.0.0.1:1/x",
      "https://127.0.0.1:1/?q",
      "https://127.0.0.1:1/#f",
      "http://127.0.0.1:1/#",
      "http://127.0.0.1:1/?",
      "file:///",
      `https://${"a".repeat(260)}/`,
    ])
      expect(peerEndpointScheme(bad), bad).toBeNull();
  });
});

describe("TLS and plain peers never share a wave", () => {
  const join = (t: SwarmTracker, node: string, endpoint: string) => {
    const answer = t.join(node, { image: "http://store/img", checksum: "sha256:x", size: 35, endpoint });
    if (answer.kind !== "joined") throw new Error("not joined");
    return answer;
  };

  it("the tracker keeps an image's TLS and plain members in two waves with two tokens", () => {
    const t = new SwarmTracker({ logger: silentLogger, chunkBytes: 10 });
    const a = join(t, "a", "https://127.0.0.1:1/");
    const b = join(t, "b", "http://127.0.0.1:2/");
    const c = join(t, "c", "https://127.0.0.1:3/");
    expect(a.wave).not.toBe(b.wave);
    expect(a.token).not.toBe(b.token);
    expect(c.wave).toBe(a.wave);
    t.close();
  });

  it("the conductor refuses an https:// endpoint from an agent on a plain link, and takes it over TLS", () => {
    const t = new SwarmTracker({ logger: silentLogger, chunkBytes: 10 });
    const sent: OutgoingFrame[] = [];
    const frame = {
      v: 1 as const,
      type: "swarm_join" as const,
      id: "q1",
      image: "http://store/img",
      size: 35,
      endpoint: "https://10.0.0.5:4000/",
    };
    handleSwarmFrame(
      t,
      { node: "n", address: "::ffff:10.0.0.5", tls: false, send: (f) => sent.push(f) },
      frame,
    );
    expect(sent[0]).toMatchObject({ type: "swarm_reply", id: "q1", answer: { kind: "refused" } });
    expect(JSON.stringify(sent[0])).toMatch(/TLS link/);
    handleSwarmFrame(t, { node: "n", address: "10.0.0.5", tls: true, send: (f) => sent.push(f) }, frame);
    expect(sent[1]).toMatchObject({ answer: { kind: "joined" } });
    // a plain endpoint over a TLS link is the operator's choice (deploy.swarm_peer_tls off): taken
    handleSwarmFrame(
      t,
      { node: "m", address: "10.0.0.6", tls: true, send: (f) => sent.push(f) },
      { ...frame, id: "q2", endpoint: "http://10.0.0.6:4000/" },
    );
    expect(sent[2]).toMatchObject({ answer: { kind: "joined" } });
    t.close();
  });
});

describe("peer links over TLS keyed by the wave's secret", () => {
  const closers: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });

  /** A TLS peer server holding chunk 0 (random bytes) of WAVE. */
  async function tlsPeer(): Promise<{ server: PeerServer; chunk: Buffer }> {
    const server = await PeerServer.listen({ host: "127.0.0.1", tls: true, logger: silentLogger });
    const cache = new ChunkCache(8 * CHUNK_BYTES);
    const chunk = randomBytes(CHUNK_BYTES);
    cache.put(0, [chunk]);
    server.serve(WAVE, TOKEN, cache);
    closers.push(() => server.close());
    return { server, chunk };
  }

  const fetchOptions = (
    url: string,
    into: Buffer,
    overrides: Partial<{ token: string; wave: string }> = {},
  ) => {
    const connections = new PeerConnections();
    closers.push(() => connections.close());
    return {
      url,
      wave: WAVE,
      token: TOKEN,
      tls: true,
      index: 0,
      length: CHUNK_BYTES,
      stallMs: 5_000,
      connections,
      into,
      ...overrides,
    };
  };

  it("a member with the wave's key gets the chunk over TLS 1.3, straight into its buffer", async () => {
    const { server, chunk } = await tlsPeer();
    expect(server.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+\/$/);
    const into = Buffer.alloc(CHUNK_BYTES);
    const got = await fetchFromPeer(fetchOptions(server.url, into));
    expect(got.data.equals(chunk)).toBe(true);
    expect(got.data.buffer).toBe(into.buffer);
    expect(got.sha256).toBe(createHash("sha256").update(chunk).digest("hex"));
    expect(server.served).toBe(CHUNK_BYTES);
  });

  it("the body lands in the caller's buffer: every piece after the headers is a view of it", async () => {
    const { server, chunk } = await tlsPeer();
    const url = new URL(chunkPath(WAVE, 0), server.url);
    const connection = await Http1Connection.open(url, {
      connectTimeoutMs: 5_000,
      stallTimeoutMs: 5_000,
      tls: peerClientTls(peerKey(WAVE, TOKEN)),
    });
    closers.push(() => connection.close());
    const response = await connection.get(url, { authorization: `Bearer ${TOKEN}` });
    expect(response.status).toBe(200);
    const target = Buffer.alloc(CHUNK_BYTES);
    connection.readInto(target);
    let at = 0;
    let outside = 0;
    for (let piece = await response.read(); piece !== null; piece = await response.read()) {
      if (piece.buffer !== target.buffer) {
        outside += piece.length;
        piece.copy(target, at);
      }
      at += piece.length;
    }
    expect(target.equals(chunk)).toBe(true);
    // only the records decrypted before readInto (a few 16 KiB ones) sit in the ring; the rest lands in place
    expect(outside).toBeLessThan(CHUNK_BYTES / 8);
  });

  it("a client with a wrong key (right wave id) fails the handshake: no chunk, nothing served", async () => {
    const { server } = await tlsPeer();
    await expect(
      fetchFromPeer(fetchOptions(server.url, Buffer.alloc(CHUNK_BYTES), { token: "x".repeat(43) })),
    ).rejects.toMatchObject({ failure: "unreachable" });
    expect(server.served).toBe(0);
  });

  it("a client naming another wave fails the handshake", async () => {
    const { server } = await tlsPeer();
    const url = new URL(chunkPath(WAVE, 0), server.url);
    await expect(
      Http1Connection.open(url, {
        connectTimeoutMs: 5_000,
        stallTimeoutMs: 5_000,
        tls: peerClientTls(peerKey("other-wave", TOKEN)),
      }),
    ).rejects.toThrow();
    expect(server.served).toBe(0);
  });

  it("a plain HTTP client with the right bearer token gets no HTTP answer at all", async () => {
    const { server } = await tlsPeer();
    const plain = server.url.replace("https:", "http:");
    const url = new URL(chunkPath(WAVE, 0), plain);
    const connection = await Http1Connection.open(url, { connectTimeoutMs: 5_000, stallTimeoutMs: 5_000 });
    closers.push(() => connection.close());
    await expect(connection.get(url, { authorization: `Bearer ${TOKEN}` })).rejects.toThrow();
    expect(server.served).toBe(0);
  });

  it("a TLS client that offers no key (certificates only) fails the handshake", async () => {
    const { server } = await tlsPeer();
    const url = new URL(chunkPath(WAVE, 0), server.url);
    await expect(
      Http1Connection.open(url, { connectTimeoutMs: 5_000, stallTimeoutMs: 5_000 }),
    ).rejects.toThrow();
    expect(server.served).toBe(0);
  });

  describe("a server posing as a peer", () => {
    let dir: string;
    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), "anvil-peer-tls-"));
    });
    afterAll(async () => {
      await rm(dir, { recursive: true, force: true });
    });

    async function impostor(
      options: Parameters<typeof createTlsServer>[0],
    ): Promise<{ url: string; got: () => number }> {
      let requests = 0;
      const server = createTlsServer(options, (socket) => {
        socket.on("data", () => {
          requests += 1;
          socket.end(`HTTP/1.1 200 OK\r\ncontent-length: ${CHUNK_BYTES}\r\n\r\n`);
        });
      });
      server.on("tlsClientError", () => undefined);
      server.listen(0, "127.0.0.1");
      await once(server, "listening");
      closers.push(() => new Promise<void>((done) => server.close(() => done())));
      return { url: `https://127.0.0.1:${(server.address() as AddressInfo).port}/`, got: () => requests };
    }

    it("with a wrong key is refused in the handshake, before the request is sent", async () => {
      const fake = await impostor(peerServerTls(() => peerKey(WAVE, "y".repeat(43)).key));
      await expect(fetchFromPeer(fetchOptions(fake.url, Buffer.alloc(CHUNK_BYTES)))).rejects.toMatchObject({
        failure: "unreachable",
      });
      expect(fake.got()).toBe(0);
    });

    it("with a certificate (even one its client would trust) is refused: peers prove the key", async () => {
      const lab = await makeLabCa({ dir: join(dir, "ca"), names: ["127.0.0.1"] });
      const [cert, key, ca] = await Promise.all([
        readFile(lab.cert),
        readFile(lab.key),
        readFile(lab.caCert),
      ]);
      const fake = await impostor({ cert, key, pskCallback: () => null });
      const connections = new PeerConnections();
      closers.push(() => connections.close());
      const url = new URL(chunkPath(WAVE, 0), fake.url);
      // the wave's key offered, and the impostor's CA trusted on top: still refused
      await expect(
        Http1Connection.open(url, {
          connectTimeoutMs: 5_000,
          stallTimeoutMs: 5_000,
          ca: ca.toString(),
          tls: peerClientTls(peerKey(WAVE, TOKEN)),
        }),
      ).rejects.toMatchObject({ code: "ERR_ANVIL_PEER_CERTIFICATE" });
      await expect(fetchFromPeer(fetchOptions(fake.url, Buffer.alloc(CHUNK_BYTES)))).rejects.toMatchObject({
        failure: "unreachable",
      });
      expect(fake.got()).toBe(0);
    });
  });

  it("a TLS taker never dials a plain peer (its token would cross in the clear), nor a plain one a TLS peer", async () => {
    await expect(
      fetchFromPeer(fetchOptions("http://127.0.0.1:9/", Buffer.alloc(CHUNK_BYTES))),
    ).rejects.toMatchObject({ failure: "refused" });
    await expect(
      fetchFromPeer({ ...fetchOptions("https://127.0.0.1:9/", Buffer.alloc(CHUNK_BYTES)), tls: false }),
    ).rejects.toMatchObject({ failure: "refused" });
  });

  it("an upload its taker stops reading is cut after the idle bound, freeing its upload slot", async () => {
    const big = 32 * CHUNK_BYTES; // more than the sockets' buffers hold: the stalled upload cannot finish
    const server = await PeerServer.listen({
      host: "127.0.0.1",
      tls: true,
      maxUploads: 1,
      idleTimeoutMs: 200,
      logger: silentLogger,
    });
    closers.push(() => server.close());
    const cache = new ChunkCache(2 * big);
    cache.put(0, [Buffer.alloc(big, 1)]);
    cache.put(1, [randomBytes(CHUNK_BYTES)]);
    server.serve(WAVE, TOKEN, cache);
    const url = new URL(chunkPath(WAVE, 0), server.url);
    const staller = await Http1Connection.open(url, {
      connectTimeoutMs: 5_000,
      stallTimeoutMs: 60_000,
      tls: peerClientTls(peerKey(WAVE, TOKEN)),
    });
    closers.push(() => staller.close());
    const response = await staller.get(url, { authorization: `Bearer ${TOKEN}` });
    expect(response.status).toBe(200); // and never read: the one upload slot is held
    const busy = await fetchFromPeer({
      ...fetchOptions(server.url, Buffer.alloc(CHUNK_BYTES)),
      index: 1,
    }).catch((error: unknown) => error);
    expect(busy).toMatchObject({ failure: "busy" });
    // once the stalled upload is cut, the slot serves the next taker
    for (;;) {
      const got = await fetchFromPeer({
        ...fetchOptions(server.url, Buffer.alloc(CHUNK_BYTES)),
        index: 1,
      }).catch((error: unknown) => error);
      if (!(got instanceof Error)) break;
      expect(got).toMatchObject({ failure: "busy" });
      await new Promise((done) => setTimeout(done, 50));
    }
  });

  it("the key is the wave's, never the token itself", () => {
    const a = peerKey(WAVE, TOKEN);
    expect(a.identity).toBe(WAVE);
    expect(a.key).toHaveLength(32);
    expect(a.key.equals(Buffer.from(TOKEN))).toBe(false);
    expect(peerKey("other", TOKEN).key.equals(a.key)).toBe(false);
    expect(peerKey(WAVE, "u".repeat(43)).key.equals(a.key)).toBe(false);
  });
});
