import { createHash, randomBytes } from "node:crypto";
import { once } from "node:events";
import { mkdir, mkdtemp, open, readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { Server, ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { join } from "node:path";
import { afterEach, beforeAll, afterAll, describe, expect, it } from "vitest";
import { MemoryAgentDirectory } from "../../conductor/agents/memory-directory.ts";
import { SwarmTracker } from "../../conductor/agents/swarm-tracker.ts";
import type { SwarmTrackerEvent } from "../../conductor/agents/swarm-tracker.ts";
import { silentLogger } from "../../shared/log.ts";
import type { SwarmStats } from "../../shared/swarm.ts";
import { ROOT, startGatewayServer } from "../helpers/agent.ts";
import type { GatewayServer } from "../helpers/agent.ts";
import { startHttpImageServer } from "../helpers/http-image-server.ts";
import type { FaultPlan, HttpImageServer } from "../helpers/http-image-server.ts";
import { claimEveryChunk, startWaveAgents, storeBytes, waveNode } from "../helpers/swarm-wave.ts";
import type { WaveAgent } from "../helpers/swarm-wave.ts";
import { waitFor } from "../helpers/wait.ts";

const MIB = 1024 * 1024;
const CHUNK = MIB;
const IMAGE_BYTES = 12 * MIB + 12_345; // the last chunk short
const DISK_BYTES = 16 * MIB;
const TAG = "5a";
const nodeUuid = (i: number): string => waveNode(TAG, i).uuid;
const macOf = (i: number): string => waveNode(TAG, i).mac;

interface WriteOutcome {
  ok: boolean;
  stats?: SwarmStats;
  error?: string;
  diskMatches: boolean;
}

/**
 * Swarm deploys through the real gateway, tracker, links and image pipeline: agents on simulated machines
 * (disks are sparse files) write one image from a loopback store, sharing chunks over loopback HTTP.
 */
describe("swarm deploys", () => {
  let dir: string;
  let image: Buffer;
  let sha256: string;
  let store: HttpImageServer;
  let gw: GatewayServer | undefined;
  let tracker: SwarmTracker | undefined;
  let events: SwarmTrackerEvent[];
  let agents: WaveAgent[] = [];
  const evil: Server[] = [];

  beforeAll(async () => {
    await mkdir(join(ROOT, ".tmp"), { recursive: true });
    dir = await mkdtemp(join(ROOT, ".tmp/swarm-"));
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
    await gw?.gateway.close();
    await gw?.kill();
    gw = undefined;
    tracker?.close();
    await store?.close();
    for (const server of evil.splice(0)) {
      server.closeAllConnections();
      server.close();
    }
  });

  async function setUp(
    count: number,
    options: { faults?: FaultPlan; assigneeWaitMs?: number; port?: number } = {},
  ): Promise<void> {
    store = await startHttpImageServer();
    store.serve("/image.raw", join(dir, "image.raw"), options.faults);
    events = [];
    tracker = new SwarmTracker({
      logger: silentLogger,
      chunkBytes: CHUNK,
      assigneeWaitMs: options.assigneeWaitMs ?? 30_000,
      onEvent: (event) => events.push(event),
    });
    const directory = new MemoryAgentDirectory();
    for (let i = 0; i < count + 2; i++) directory.addNode({ uuid: nodeUuid(i), macs: [macOf(i)] });
    gw = await startGatewayServer({
      directory,
      logger: silentLogger,
      swarm: tracker,
      ...(options.port === undefined ? {} : { port: options.port }),
    });
    agents = await startWaveAgents({ url: gw.url, tag: TAG, count, dir, diskBytes: DISK_BYTES });
    const gateway = gw.gateway;
    await waitFor(() => agents.every((a) => gateway.isConnected(a.uuid)), { what: "agents connected" });
  }

  function writeArgs(swarm: Record<string, number> = {}): unknown {
    return {
      image: {
        url: `${store.url}/image.raw?temp_url_sig=s3cr3t`,
        image_type: "whole-disk",
        checksum: { algo: "sha256", value: sha256 },
      },
      swarm: { linger_s: 30, ...swarm },
    };
  }

  async function diskMatches(disk: string): Promise<boolean> {
    const bytes = await readFile(disk);
    return bytes.subarray(0, IMAGE_BYTES).equals(image);
  }

  async function write(agent: WaveAgent, swarm: Record<string, number> = {}): Promise<WriteOutcome> {
    try {
      const result = (await gw?.gateway.call(agent.uuid, {
        name: "write_image",
        args: writeArgs(swarm),
      })) as {
        swarm?: SwarmStats;
      };
      return {
        ok: true,
        ...(result.swarm ? { stats: result.swarm } : {}),
        diskMatches: await diskMatches(agent.disk),
      };
    } catch (error) {
      return { ok: false, error: (error as Error).message, diskMatches: await diskMatches(agent.disk) };
    }
  }

  /** An agent-like peer that joins the wave and claims every chunk, serving them with `serve`. */
  async function evilPeer(uuid: string, serve: (res: ServerResponse, length: number) => void): Promise<void> {
    const server = createServer((req, res) => {
      const index = Number((req.url ?? "").split("/").pop());
      const length = Math.min(CHUNK, IMAGE_BYTES - index * CHUNK);
      serve(res, length);
    });
    const sockets = new Set<Socket>();
    server.on("connection", (s) => sockets.add(s));
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    evil.push(server);
    const { port } = server.address() as AddressInfo;
    const wave = { image: `${store.url}/image.raw`, checksum: `sha256:${sha256}`, size: IMAGE_BYTES };
    // it claims to have fetched every chunk from the store, reporting the true hashes (it read the store)
    const endpoint = `http://127.0.0.1:${port}/`;
    await claimEveryChunk(tracker!, uuid, { ...wave, endpoint, bytes: image, chunkBytes: CHUNK });
  }

  it("a wave of four agents writes correct disks while the store serves about one image", async () => {
    await setUp(4);
    const outcomes = await Promise.all(agents.map((agent) => write(agent)));
    for (const outcome of outcomes) expect(outcome).toMatchObject({ ok: true, diskMatches: true });
    const fromStore = storeBytes(store.requests, "/image.raw", IMAGE_BYTES);
    expect(fromStore).toBeGreaterThanOrEqual(IMAGE_BYTES);
    expect(fromStore).toBeLessThanOrEqual(1.5 * IMAGE_BYTES);
    const stats = outcomes.map((o) => o.stats as SwarmStats);
    const fromPeers = stats.reduce((sum, s) => sum + s.bytes_from_peers, 0);
    const served = stats.reduce((sum, s) => sum + s.bytes_served, 0);
    // every byte an agent has is either the store's or a peer's, and peers' sum is what was served
    for (const s of stats) expect(s.bytes_from_store + s.bytes_from_peers).toBe(IMAGE_BYTES);
    expect(fromPeers).toBeGreaterThan(2 * IMAGE_BYTES);
    expect(stats.reduce((sum, s) => sum + s.bytes_from_store, 0)).toBe(fromStore - 4); // 4 one-byte probes
    // an agent counts what it served until its own write ended; it serves on (linger) after that
    expect(served).toBeLessThanOrEqual(fromPeers);
    expect(served).toBeGreaterThan(0);
    for (const s of stats) {
      expect(Object.values(s.per_peer).reduce((a, b) => a + b, 0)).toBe(s.bytes_from_peers);
      expect(s.bad_chunks).toBe(0);
    }
    // one wave: the temp URL's query is not part of its identity
    expect(new Set(stats.map((s) => s.wave)).size).toBe(1);
  });

  it("a resumed write rejoins the wave: its rest from the chunk its checkpoint fell in, from a peer", async () => {
    await setUp(2);
    const [first, second] = agents as [WaveAgent, WaveAgent];
    const whole = await write(first);
    expect(whole).toMatchObject({ ok: true, diskMatches: true });
    const requestsBefore = store.requests.length;
    // the second node's disk holds the image's first 5.5 MiB, durable at its last checkpoint; it rebooted
    const checkpointBytes = 5 * CHUNK + CHUNK / 2;
    const prefix = image.subarray(0, checkpointBytes);
    const disk = await open(second.disk, "r+");
    await disk.write(prefix, 0, prefix.length, 0);
    await disk.close();
    const digest = createHash("sha256").update(prefix).digest("hex");
    const result = (await gw?.gateway.call(second.uuid, {
      name: "write_image",
      args: { ...(writeArgs() as object), resume: { bytes: checkpointBytes, algo: "sha256", digest } },
    })) as { swarm?: SwarmStats; resumed?: { from_bytes: number } };
    expect(await diskMatches(second.disk)).toBe(true);
    // restarted at the start of the chunk the checkpoint fell in, in the first node's wave
    expect(result.resumed).toEqual({ from_bytes: 5 * CHUNK });
    const stats = result.swarm as SwarmStats;
    expect(stats.wave).toBe(whole.stats?.wave);
    expect(stats.bytes_from_store + stats.bytes_from_peers).toBe(IMAGE_BYTES - 5 * CHUNK);
    // the first node holds every chunk (it lingers): the rest came from it; the store served the wave's
    // one-byte size probe and nothing else
    expect(stats.per_peer).toEqual({ [first.uuid]: IMAGE_BYTES - 5 * CHUNK });
    const later = store.requests.slice(requestsBefore).filter((r) => r.path === "/image.raw");
    expect(later.map((r) => r.range)).toEqual(["bytes=0-0"]);
  });

  it("a peer serving wrong bytes is dropped, its chunk refetched from the store, the disk correct", async () => {
    await setUp(1);
    const liar = nodeUuid(5);
    await evilPeer(liar, (res, length) => {
      res.writeHead(200, { "content-length": length }).end(randomBytes(length));
    });
    const outcome = await write(agents[0] as WaveAgent);
    expect(outcome).toMatchObject({ ok: true, diskMatches: true });
    // the chunks in flight when the first mismatch was seen may each have been tried with it: a window's worth
    expect(outcome.stats?.bad_chunks).toBeGreaterThanOrEqual(1);
    expect(outcome.stats?.bad_chunks).toBeLessThanOrEqual(4);
    expect(outcome.stats?.dropped_peers).toEqual({ [liar]: "bad_bytes" });
    expect(outcome.stats?.bytes_from_peers).toBe(0);
    expect(outcome.stats?.bytes_from_store).toBe(IMAGE_BYTES);
    expect(events).toContainEqual(expect.objectContaining({ type: "swarm.peer_dropped", peer: liar }));
  });

  it("a peer that stalls is given up after the bound, the chunk taken from the store", async () => {
    await setUp(1);
    const staller = nodeUuid(5);
    await evilPeer(staller, (res, length) => {
      res.writeHead(200, { "content-length": length });
      res.write(Buffer.alloc(1000)); // then nothing, ever
    });
    const outcome = await write(agents[0] as WaveAgent, { peer_stall_s: 0.3 });
    expect(outcome).toMatchObject({ ok: true, diskMatches: true });
    expect(outcome.stats?.dropped_peers).toEqual({ [staller]: "stalled" });
    expect(outcome.stats?.bytes_from_store).toBe(IMAGE_BYTES);
  });

  it("a peer that disconnects mid-chunk is dropped, the chunk taken from the store", async () => {
    await setUp(1);
    const quitter = nodeUuid(5);
    await evilPeer(quitter, (res, length) => {
      res.writeHead(200, { "content-length": length });
      res.write(Buffer.alloc(length / 2), () => res.destroy());
    });
    const outcome = await write(agents[0] as WaveAgent);
    expect(outcome).toMatchObject({ ok: true, diskMatches: true });
    expect(outcome.stats?.dropped_peers).toEqual({ [quitter]: "unreachable" });
  });

  it("a tracker restart mid-wave: agents finish from the store with correct disks", async () => {
    let resume!: () => void;
    const resumed = new Promise<void>((done) => (resume = done));
    await setUp(2, { faults: { pauseAfterBytes: 256 * 1024, resumeWhen: resumed } });
    const port = (gw as GatewayServer).port;
    const ids = agents.map((a) => `write-${a.uuid}`);
    const calls = agents.map((agent, i) =>
      (gw as GatewayServer).gateway
        .call(agent.uuid, { name: "write_image", args: writeArgs() }, { id: ids[i] as string })
        .catch((error: unknown) => error),
    );
    // both agents are mid-chunk at the store (a chunk request paused) when the conductor goes away
    await waitFor(() => store.requests.filter((r) => r.range !== "bytes=0-0").length >= 1, {
      what: "a chunk request at the store",
    });
    await gw?.gateway.close();
    await gw?.kill();
    expect(await Promise.all(calls)).toEqual([
      expect.objectContaining({ code: "GATEWAY_CLOSED" }),
      expect.objectContaining({ code: "GATEWAY_CLOSED" }),
    ]);
    tracker?.close();
    // a new conductor on the same port, with a fresh (empty) tracker
    const directory = new MemoryAgentDirectory();
    for (let i = 0; i < 2; i++) directory.addNode({ uuid: nodeUuid(i), macs: [macOf(i)] });
    tracker = new SwarmTracker({ logger: silentLogger, chunkBytes: CHUNK });
    gw = await startGatewayServer({ directory, logger: silentLogger, swarm: tracker, port });
    const gateway = gw.gateway;
    await waitFor(() => agents.every((a) => gateway.isConnected(a.uuid)), { what: "agents back" });
    resume();
    const results = (await Promise.all(
      agents.map((agent, i) =>
        gw!.gateway.call(agent.uuid, { name: "write_image", args: writeArgs() }, { id: ids[i] as string }),
      ),
    )) as Array<{ swarm: SwarmStats }>;
    for (const agent of agents) expect(await diskMatches(agent.disk)).toBe(true);
    for (const result of results) {
      expect(result.swarm.fallback).toMatch(/tracker/);
      expect(result.swarm.bytes_from_store + result.swarm.bytes_from_peers).toBe(IMAGE_BYTES);
    }
  });

  it("a lying assignee fails the deploy of whoever took its bytes with a clear error, never a corrupt ok", async () => {
    await setUp(1);
    const liar = nodeUuid(5);
    // it reports hashes of wrong bytes as the store's, and serves those wrong bytes consistently
    const wrong = randomBytes(IMAGE_BYTES);
    const server = createServer((req, res) => {
      const index = Number((req.url ?? "").split("/").pop());
      const chunk = wrong.subarray(index * CHUNK, Math.min(IMAGE_BYTES, (index + 1) * CHUNK));
      res.writeHead(200, { "content-length": chunk.length }).end(chunk);
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    evil.push(server);
    const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    const wave = {
      image: `${store.url}/image.raw`,
      checksum: `sha256:${sha256}`,
      size: IMAGE_BYTES,
      endpoint,
    };
    await claimEveryChunk(tracker!, liar, { ...wave, bytes: wrong, chunkBytes: CHUNK });
    const outcome = await write(agents[0] as WaveAgent);
    expect(outcome.ok).toBe(false);
    expect(outcome.error).toMatch(/sha256 mismatch.*swarm wave/);
  });
});
