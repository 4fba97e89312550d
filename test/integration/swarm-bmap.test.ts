import { createHash, randomBytes } from "node:crypto";
import { once } from "node:events";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { sharedChunks } from "../../agent/swarm/mapped-chunks.ts";
import { parseBlockMap } from "../../agent/image/bmap.ts";
import { MemoryAgentDirectory } from "../../conductor/agents/memory-directory.ts";
import { SwarmTracker } from "../../conductor/agents/swarm-tracker.ts";
import type { SwarmTrackerEvent } from "../../conductor/agents/swarm-tracker.ts";
import { silentLogger } from "../../shared/log.ts";
import type { SwarmStats } from "../../shared/swarm.ts";
import { ROOT, startGatewayServer } from "../helpers/agent.ts";
import type { GatewayServer } from "../helpers/agent.ts";
import { startHttpImageServer } from "../helpers/http-image-server.ts";
import type { HttpImageServer } from "../helpers/http-image-server.ts";
import { claimEveryChunk, startWaveAgents, storeBytes, waveNode } from "../helpers/swarm-wave.ts";
import type { WaveAgent } from "../helpers/swarm-wave.ts";
import { waitFor } from "../helpers/wait.ts";

const KIB = 1024;
const MIB = 1024 * KIB;
const CHUNK = MIB;
const BLOCK = 4 * KIB;
const DISK_BYTES = 24 * MIB;
const TAG = "5b";
const nodeUuid = (i: number): string => waveNode(TAG, i).uuid;
const macOf = (i: number): string => waveNode(TAG, i).mac;

/** Block-aligned data ranges [start, end) of a test image; everything else is a hole. */
type Ranges = ReadonlyArray<readonly [number, number]>;

/**
 * Short ranges: one across chunks 1-3 (checked before it is written), one inside chunk 4 (its digest tests a
 * peer's copy of that chunk), one block in chunk 6 (a sparse chunk: fetched straight from the store), and the
 * image's short tail.
 */
const SHORT: Ranges = [
  [MIB + 256 * KIB, 3 * MIB + 512 * KIB],
  [4 * MIB + 256 * KIB, 4 * MIB + 768 * KIB],
  [6 * MIB, 6 * MIB + BLOCK],
  [8 * MIB, 8 * MIB + 1000],
];
const SHORT_SIZE = 8 * MIB + 1000;
/** One range across 10 chunks: longer than what is held back, so checked as it passes. */
const LONG: Ranges = [[MIB, 11 * MIB]];
const LONG_SIZE = 12 * MIB;

interface TestImage {
  path: string;
  bytes: Buffer;
  sha256: string;
  mappedBytes: number;
}

/** A bmaptool 2.0 block map of `image` with a sha256 per range (as `bmaptool create` writes it). */
function blockMapXml(image: Buffer, ranges: Ranges): string {
  const blocks = Math.ceil(image.length / BLOCK);
  const lines = ranges.map(([start, end]) => {
    const first = start / BLOCK;
    const last = Math.ceil(end / BLOCK) - 1;
    const digest = createHash("sha256")
      .update(image.subarray(start, Math.min(image.length, (last + 1) * BLOCK)))
      .digest("hex");
    return `    <Range chksum="${digest}"> ${first}-${last} </Range>`;
  });
  const mapped = ranges.reduce((n, [s, e]) => n + Math.ceil(e / BLOCK) - s / BLOCK, 0);
  return [
    `<?xml version="1.0" ?>`,
    `<bmap version="2.0">`,
    `  <ImageSize> ${image.length} </ImageSize>`,
    `  <BlockSize> ${BLOCK} </BlockSize>`,
    `  <BlocksCount> ${blocks} </BlocksCount>`,
    `  <MappedBlocksCount> ${mapped} </MappedBlocksCount>`,
    `  <ChecksumType> sha256 </ChecksumType>`,
    `  <BlockMap>`,
    ...lines,
    `  </BlockMap>`,
    `</bmap>`,
    ``,
  ].join("\n");
}

interface Outcome {
  ok: boolean;
  stats?: SwarmStats;
  error?: string;
  diskMatches: boolean;
}

/**
 * Block-mapped deploys in a swarm wave, through the real gateway, tracker, links and image pipeline:
 * simulated machines (sparse disk files) write a sparse image from a loopback store with its block map.
 */
describe("swarm deploys with a block map", () => {
  let dir: string;
  const images = new Map<string, TestImage>();
  let store: HttpImageServer;
  let gw: GatewayServer | undefined;
  let tracker: SwarmTracker | undefined;
  let events: SwarmTrackerEvent[];
  let agents: WaveAgent[] = [];
  const evil: Server[] = [];

  async function makeImage(name: string, size: number, ranges: Ranges): Promise<void> {
    const bytes = Buffer.alloc(size);
    let mappedBytes = 0;
    for (const [start, end] of ranges) {
      randomBytes(end - start).copy(bytes, start);
      mappedBytes += end - start;
    }
    const path = join(dir, `${name}.raw`);
    await writeFile(path, bytes);
    await writeFile(join(dir, `${name}.bmap`), blockMapXml(bytes, ranges));
    images.set(name, {
      path,
      bytes,
      sha256: createHash("sha256").update(bytes).digest("hex"),
      mappedBytes,
    });
  }

  beforeAll(async () => {
    await mkdir(join(ROOT, ".tmp"), { recursive: true });
    dir = await mkdtemp(join(ROOT, ".tmp/swarm-bmap-"));
    await makeImage("short", SHORT_SIZE, SHORT);
    await makeImage("long", LONG_SIZE, LONG);
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

  async function setUp(count: number): Promise<void> {
    store = await startHttpImageServer();
    for (const name of images.keys()) {
      store.serve(`/${name}.raw`, join(dir, `${name}.raw`));
      store.serve(`/${name}.bmap`, join(dir, `${name}.bmap`));
    }
    events = [];
    tracker = new SwarmTracker({ logger: silentLogger, chunkBytes: CHUNK, onEvent: (e) => events.push(e) });
    const directory = new MemoryAgentDirectory();
    for (let i = 0; i < count; i++) directory.addNode({ uuid: nodeUuid(i), macs: [macOf(i)] });
    gw = await startGatewayServer({ directory, logger: silentLogger, swarm: tracker });
    agents = await startWaveAgents({ url: gw.url, tag: TAG, count, dir, diskBytes: DISK_BYTES });
    const gateway = gw.gateway;
    await waitFor(() => agents.every((a) => gateway.isConnected(a.uuid)), { what: "agents connected" });
  }

  async function write(agent: WaveAgent, name: string, bmap = true): Promise<Outcome> {
    const image = images.get(name) as TestImage;
    const diskMatches = async (): Promise<boolean> =>
      (await readFile(agent.disk)).subarray(0, image.bytes.length).equals(image.bytes);
    const args = {
      image: {
        url: `${store.url}/${name}.raw?temp_url_sig=s3cr3t`,
        image_type: "whole-disk",
        checksum: { algo: "sha256", value: image.sha256 },
        ...(bmap ? { block_map: `${store.url}/${name}.bmap` } : {}),
      },
      swarm: { linger_s: 30 },
    };
    try {
      const result = (await gw?.gateway.call(agent.uuid, { name: "write_image", args })) as {
        swarm?: SwarmStats;
      };
      return { ok: true, ...(result.swarm ? { stats: result.swarm } : {}), diskMatches: await diskMatches() };
    } catch (error) {
      return { ok: false, error: (error as Error).message, diskMatches: await diskMatches() };
    }
  }

  /**
   * A member that read wrong bytes as the store's (or lies): it reports their hashes as every chunk's anchor
   * and serves them, so its chunks pass the anchor check of whoever takes them.
   */
  async function lyingAssignee(uuid: string, name: string): Promise<void> {
    const image = images.get(name) as TestImage;
    const wrong = Buffer.from(image.bytes);
    for (let at = 0; at < wrong.length; at += 4 * KIB) wrong[at] = (wrong[at] as number) ^ 0xff;
    const chunkOf = (index: number): Buffer =>
      wrong.subarray(index * CHUNK, Math.min(wrong.length, (index + 1) * CHUNK));
    const server = createServer((req, res) => {
      const chunk = chunkOf(Number((req.url ?? "").split("/").pop()));
      res.writeHead(200, { "content-length": chunk.length }).end(chunk);
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    evil.push(server);
    const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    const size = image.bytes.length;
    const wave = { image: `${store.url}/${name}.raw`, checksum: `sha256:${image.sha256}`, size, endpoint };
    await claimEveryChunk(tracker!, uuid, { ...wave, bytes: wrong, chunkBytes: CHUNK });
  }

  it("shares its chunks: a wave of three takes the mapped chunks from the store about once", async () => {
    await setUp(3);
    const image = images.get("short") as TestImage;
    const outcomes = await Promise.all(agents.map((agent) => write(agent, "short")));
    for (const outcome of outcomes) expect(outcome).toMatchObject({ ok: true, diskMatches: true });
    const stats = outcomes.map((o) => o.stats as SwarmStats);
    expect(new Set(stats.map((s) => s.wave)).size).toBe(1);
    // the shared chunks (1-4) once, the sparse chunk's block per node, and each node's probes (8 + 1 bytes)
    const shared = sharedChunks(parseBlockMap(await readFile(join(dir, "short.bmap"), "utf8")), CHUNK);
    expect(shared).toEqual([1, 2, 3, 4, 8]);
    const sharedBytes = 4 * CHUNK + 1000;
    const fromStore = storeBytes(store.requests, "/short.raw", image.bytes.length);
    expect(fromStore).toBe(sharedBytes + 3 * (BLOCK + 9));
    expect(fromStore).toBeLessThan(1.5 * image.mappedBytes);
    const fromPeers = stats.reduce((sum, s) => sum + s.bytes_from_peers, 0);
    expect(fromPeers).toBe(2 * sharedBytes);
    // every node took its shared chunks from the store or a peer, and the sparse block from the store
    for (const s of stats) expect(s.bytes_from_store + s.bytes_from_peers).toBe(sharedBytes + BLOCK);
    // unmapped ranges are never fetched: no request reaches chunk 0, 5 or 7 beyond the 8-byte probe
    for (const record of store.requests.filter((r) => r.path === "/short.raw")) {
      const start = Number(/^bytes=(\d+)-/.exec(record.range ?? "")?.[1]);
      expect([0, 1, 2, 3, 4, 6, 8]).toContain(Math.floor(start / CHUNK));
    }
  });

  it("a block-mapped node and a node streaming the whole image share one wave", async () => {
    await setUp(3);
    const image = images.get("short") as TestImage;
    const mapped = [write(agents[1] as WaveAgent, "short"), write(agents[2] as WaveAgent, "short")];
    // NOTE: the streaming node joins once a mapped node holds a chunk. Started together, a loaded machine
    // could let it ask for every chunk before the others joined: it then fetched them all as their assignee
    // (one CI run in many), and the wave shared nothing with it to measure.
    await waitFor(() => tracker!.stats().some((wave) => wave.members === 2 && wave.anchors > 0), {
      what: "a block-mapped node holding a chunk",
    });
    const streaming = write(agents[0] as WaveAgent, "short", false);
    const outcomes = await Promise.all([streaming, ...mapped]);
    for (const outcome of outcomes) expect(outcome).toMatchObject({ ok: true, diskMatches: true });
    expect(new Set(outcomes.map((o) => o.stats?.wave)).size).toBe(1);
    const fromStore = storeBytes(store.requests, "/short.raw", image.bytes.length);
    expect(fromStore).toBeLessThan(image.bytes.length + 3 * (BLOCK + 9) + 1);
    expect(outcomes[0]?.stats?.bytes_from_store).toBeLessThan(image.bytes.length);
  });

  it("a lying assignee's chunks are caught by the block map's digests and replaced from the store", async () => {
    await setUp(1);
    const liar = nodeUuid(7);
    await lyingAssignee(liar, "short");
    const outcome = await write(agents[0] as WaveAgent, "short");
    // without a block map this node would fail the whole-image checksum; the map's digests name the bad chunks
    expect(outcome).toMatchObject({ ok: true, diskMatches: true });
    expect(outcome.stats?.dropped_peers).toEqual({ [liar]: "bad_bytes" });
    expect(outcome.stats?.bad_chunks).toBeGreaterThanOrEqual(1);
    expect(events).toContainEqual(expect.objectContaining({ type: "swarm.peer_dropped", peer: liar }));
  });

  it("a lying assignee's chunks in a range too long to hold back fail the write clearly, never ok", async () => {
    await setUp(1);
    await lyingAssignee(nodeUuid(7), "long");
    const outcome = await write(agents[0] as WaveAgent, "long");
    expect(outcome.ok).toBe(false);
    expect(outcome.error).toMatch(/do not match the block map's sha256 .*swarm wave .*chunks from peers/);
  });
});
