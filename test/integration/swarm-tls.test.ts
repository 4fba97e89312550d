import { createHash, randomBytes } from "node:crypto";
import { once } from "node:events";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer as createHttpServer } from "node:http";
import type { Server, ServerResponse } from "node:http";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { createServer as createTlsServer } from "node:tls";
import type { Server as TlsServer, TlsOptions } from "node:tls";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Http1Connection } from "../../agent/image/http1.ts";
import { PeerConnections, fetchFromPeer } from "../../agent/swarm/peer-fetch.ts";
import { peerKey, peerServerTls } from "../../agent/swarm/peer-tls.ts";
import { createAgentGateway } from "../../conductor/agents/gateway.ts";
import type { AgentGateway } from "../../conductor/agents/gateway.ts";
import { MemoryAgentDirectory } from "../../conductor/agents/memory-directory.ts";
import { SwarmTracker } from "../../conductor/agents/swarm-tracker.ts";
import type { SwarmJoin } from "../../conductor/agents/swarm-tracker.ts";
import { makeLabCa } from "../../conductor/tls/lab-ca.ts";
import type { LabCa } from "../../conductor/tls/lab-ca.ts";
import { loadTlsMaterial } from "../../conductor/tls/material.ts";
import { silentLogger } from "../../shared/log.ts";
import { chunkPath } from "../../shared/swarm.ts";
import type { SwarmAnswer, SwarmStats } from "../../shared/swarm.ts";
import { ROOT } from "../helpers/agent.ts";
import { startHttpImageServer } from "../helpers/http-image-server.ts";
import type { HttpImageServer } from "../helpers/http-image-server.ts";
import { claimEveryChunk, startWaveAgents, waveNode } from "../helpers/swarm-wave.ts";
import type { WaveAgent } from "../helpers/swarm-wave.ts";
import { waitFor } from "../helpers/wait.ts";

const MIB = 1024 * 1024;
const CHUNK = MIB;
const IMAGE_BYTES = 8 * MIB + 777; // the last chunk short
const DISK_BYTES = 12 * MIB;
const TAG = "5c";
const nodeUuid = (i: number): string => waveNode(TAG, i).uuid;
const macOf = (i: number): string => waveNode(TAG, i).mac;

/**
 * Swarm deploys whose agents reach the conductor over WSS with a pinned CA: their peer links are TLS keyed
 * by the wave's secret (the real gateway, tracker, links and image pipeline; disks are sparse files).
 */
describe("swarm deploys over TLS peer links", () => {
  let dir: string;
  let lab: LabCa;
  let image: Buffer;
  let sha256: string;
  let store: HttpImageServer;
  let gateway: AgentGateway | undefined;
  let server: Server | undefined;
  let tracker: SwarmTracker | undefined;
  /** Every join the tracker answered: the endpoint and the answer (the wave's token, as its members got it). */
  let joins: Array<{ node: string; request: SwarmJoin; answer: SwarmAnswer }>;
  let agents: WaveAgent[] = [];
  const impostors: TlsServer[] = [];

  beforeAll(async () => {
    await mkdir(join(ROOT, ".tmp"), { recursive: true });
    dir = await mkdtemp(join(ROOT, ".tmp/swarm-tls-"));
    lab = await makeLabCa({ dir: join(dir, "ca"), names: ["127.0.0.1"] });
    image = randomBytes(IMAGE_BYTES);
    sha256 = createHash("sha256").update(image).digest("hex");
    await writeFile(join(dir, "image.raw"), image);
  });

  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  afterEach(async () => {
    await Promise.all(agents.map((a) => a.link.stop()));
    agents = [];
    await gateway?.close();
    server?.closeAllConnections();
    await new Promise<void>((done) => (server ? server.close(() => done()) : done()));
    server = undefined;
    tracker?.close();
    await store?.close();
    for (const impostor of impostors.splice(0)) impostor.close();
  });

  /** `count` agents on a conductor link over wss:// with the pinned lab CA (`plain`: over ws://). */
  async function setUp(count: number, options: { plain?: boolean } = {}): Promise<void> {
    store = await startHttpImageServer();
    store.serve("/image.raw", join(dir, "image.raw"));
    tracker = new SwarmTracker({ logger: silentLogger, chunkBytes: CHUNK });
    joins = [];
    const join0 = tracker.join.bind(tracker);
    tracker.join = (node, request) => {
      const answer = join0(node, request);
      joins.push({ node, request, answer });
      return answer;
    };
    const directory = new MemoryAgentDirectory();
    for (let i = 0; i < count; i++) directory.addNode({ uuid: nodeUuid(i), macs: [macOf(i)] });
    gateway = createAgentGateway({ directory, logger: silentLogger, swarm: tracker });
    const material = loadTlsMaterial({ cert: lab.cert, key: lab.key, ca: lab.caCert });
    if (material === null) throw new Error("no TLS material");
    const notFound = (_q: unknown, res: ServerResponse): void => void res.writeHead(404).end();
    server = options.plain
      ? createHttpServer(notFound)
      : createServer({ cert: material.cert, key: material.key }, notFound);
    gateway.attach(server);
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const scheme = options.plain ? "ws" : "wss";
    const url = `${scheme}://127.0.0.1:${(server.address() as AddressInfo).port}/v1/agent`;
    agents = await startWaveAgents({
      url,
      tag: TAG,
      count,
      dir,
      diskBytes: DISK_BYTES,
      ...(options.plain ? {} : { pinnedFingerprint: lab.caFingerprint }),
    });
    const gw = gateway;
    await waitFor(() => agents.every((a) => gw.isConnected(a.uuid)), { what: "agents connected over wss" });
  }

  async function write(
    agent: WaveAgent,
    swarm: Record<string, unknown> = {},
  ): Promise<{ ok: boolean; stats?: SwarmStats; error?: string; diskMatches: boolean }> {
    const diskMatches = async (): Promise<boolean> =>
      (await readFile(agent.disk)).subarray(0, IMAGE_BYTES).equals(image);
    try {
      const result = (await gateway?.call(agent.uuid, {
        name: "write_image",
        args: {
          image: {
            url: `${store.url}/image.raw?temp_url_sig=s3cr3t`,
            image_type: "whole-disk",
            checksum: { algo: "sha256", value: sha256 },
          },
          swarm: { linger_s: 30, ...swarm },
        },
      })) as { swarm?: SwarmStats };
      return { ok: true, ...(result.swarm ? { stats: result.swarm } : {}), diskMatches: await diskMatches() };
    } catch (error) {
      return { ok: false, error: (error as Error).message, diskMatches: await diskMatches() };
    }
  }

  /**
   * A server at an address the tracker names for every chunk (as a host that took over a member's address
   * would be), claiming the store's true hashes, but without the wave's key: `tls` is what it answers with.
   */
  async function impostor(uuid: string, tls: TlsOptions): Promise<{ requests: () => number }> {
    let requests = 0;
    const fake = createTlsServer(tls, (socket) => {
      socket.on("data", () => {
        requests += 1;
        socket.end(`HTTP/1.1 200 OK\r\ncontent-length: ${CHUNK}\r\n\r\n${"x".repeat(CHUNK)}`);
      });
    });
    fake.on("tlsClientError", () => undefined);
    fake.listen(0, "127.0.0.1");
    await once(fake, "listening");
    impostors.push(fake);
    const endpoint = `https://127.0.0.1:${(fake.address() as AddressInfo).port}/`;
    const wave = {
      image: `${store.url}/image.raw`,
      checksum: `sha256:${sha256}`,
      size: IMAGE_BYTES,
      endpoint,
    };
    await claimEveryChunk(tracker!, uuid, { ...wave, bytes: image, chunkBytes: CHUNK });
    return { requests: () => requests };
  }

  it("a wave over a TLS link serves its peers over TLS: correct disks, the store about one image", async () => {
    await setUp(3);
    const outcomes = await Promise.all(agents.map((agent) => write(agent)));
    for (const outcome of outcomes) expect(outcome).toMatchObject({ ok: true, diskMatches: true });
    expect(joins.map((j) => j.request.endpoint)).toEqual([
      expect.stringMatching(/^https:\/\/127\.0\.0\.1:\d+\/$/),
      expect.stringMatching(/^https:/),
      expect.stringMatching(/^https:/),
    ]);
    const stats = outcomes.map((o) => o.stats as SwarmStats);
    expect(new Set(stats.map((s) => s.wave)).size).toBe(1);
    for (const s of stats) {
      expect(s.bytes_from_store + s.bytes_from_peers).toBe(IMAGE_BYTES);
      expect(s.dropped_peers).toEqual({});
    }
    expect(stats.reduce((sum, s) => sum + s.bytes_from_peers, 0)).toBeGreaterThan(IMAGE_BYTES);
    expect(stats.reduce((sum, s) => sum + s.bytes_from_store, 0)).toBeLessThanOrEqual(1.5 * IMAGE_BYTES);
  });

  it("a host without the wave's key reads no chunk from a member, token or not; a member does", async () => {
    await setUp(1);
    expect(await write(agents[0] as WaveAgent)).toMatchObject({ ok: true, diskMatches: true });
    // the agent lingers, serving its chunks; its endpoint and the wave's token as the tracker handed them
    const { request, answer } = joins[0] as (typeof joins)[number];
    if (answer.kind !== "joined") throw new Error("not joined");
    const connections = new PeerConnections();
    const fetch = (overrides: { token?: string; tls?: boolean; url?: string }) =>
      fetchFromPeer({
        url: request.endpoint,
        wave: answer.wave,
        token: answer.token,
        tls: true,
        index: 0,
        length: CHUNK,
        stallMs: 5_000,
        connections,
        into: Buffer.alloc(CHUNK),
        ...overrides,
      });
    try {
      await expect(fetch({ token: "z".repeat(43) })).rejects.toMatchObject({ failure: "unreachable" });
      // the right bearer token over plain HTTP: the TLS server gives no HTTP answer at all
      const plain = new URL(chunkPath(answer.wave, 0), request.endpoint.replace("https:", "http:"));
      const connection = await Http1Connection.open(plain, {
        connectTimeoutMs: 5_000,
        stallTimeoutMs: 5_000,
      });
      await expect(connection.get(plain, { authorization: `Bearer ${answer.token}` })).rejects.toThrow();
      connection.close();
      // the control: with the wave's key the same request gets the chunk
      const got = await fetch({});
      expect(got.data.equals(image.subarray(0, CHUNK))).toBe(true);
    } finally {
      connections.close();
    }
  });

  it("servers posing as peers without the key are dropped; the node writes the right bytes from the store", async () => {
    await setUp(1);
    const wrongKey = await impostor(
      nodeUuid(5),
      peerServerTls(() => peerKey("guess", "g".repeat(43)).key),
    );
    const [cert, key] = await Promise.all([readFile(lab.cert), readFile(lab.key)]);
    // a certificate from the conductor's own pinned CA: still no proof of the wave's key
    const withCert = await impostor(nodeUuid(6), { cert, key });
    const outcome = await write(agents[0] as WaveAgent);
    expect(outcome).toMatchObject({ ok: true, diskMatches: true });
    expect(outcome.stats?.dropped_peers).toEqual({
      [nodeUuid(5)]: "unreachable",
      [nodeUuid(6)]: "unreachable",
    });
    expect(outcome.stats?.bytes_from_peers).toBe(0);
    expect(outcome.stats?.bytes_from_store).toBe(IMAGE_BYTES);
    // refused in the handshake: neither heard a request (nor the token in it)
    expect(wrongKey.requests()).toBe(0);
    expect(withCert.requests()).toBe(0);
  });

  it("a plain link keeps plain peer links", async () => {
    await setUp(2, { plain: true });
    const outcomes = await Promise.all(agents.map((agent) => write(agent)));
    for (const outcome of outcomes) expect(outcome).toMatchObject({ ok: true, diskMatches: true });
    expect(joins.map((j) => j.request.endpoint)).toEqual([
      expect.stringMatching(/^http:\/\//),
      expect.stringMatching(/^http:\/\//),
    ]);
    expect(outcomes.reduce((sum, o) => sum + (o.stats?.bytes_from_peers ?? 0), 0)).toBeGreaterThan(0);
  });

  it("peer_tls off (the operator's switch) keeps plain peer links over a TLS link", async () => {
    await setUp(2);
    const outcomes = await Promise.all(agents.map((agent) => write(agent, { peer_tls: "off" })));
    for (const outcome of outcomes) expect(outcome).toMatchObject({ ok: true, diskMatches: true });
    expect(joins.map((j) => j.request.endpoint)).toEqual([
      expect.stringMatching(/^http:\/\//),
      expect.stringMatching(/^http:\/\//),
    ]);
    expect(outcomes.reduce((sum, o) => sum + (o.stats?.bytes_from_peers ?? 0), 0)).toBeGreaterThan(0);
  });
});
