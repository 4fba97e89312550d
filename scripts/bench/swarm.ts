/**
 * Swarm deploys: 8 and 16 agents (the real AgentLink and image pipeline, simulated machines, in a few child
 * processes) write one image from a loopback store whose uplink is rate-limited (one token bucket for all
 * connections), swarm off and on in one run, plus one node alone. Prints bytes served by the store and wall
 * time per case. Goal: with the swarm, ≤ 1.5 images of store bytes for 16 nodes and the wave ≤ 2× one node.
 * What it writes: each simulated disk is a sparse file; the image is 64 KiB of random bytes at the start of
 * every MiB and zeros elsewhere, so the store and the swarm move every byte (hashed in full, whole-image
 * sha256 verified) while each disk file holds only 1/16 of the image (the writer skips zero blocks on a target
 * that reads zeros). With --bmap the image is 2 MiB of random bytes at the start of every 8 MiB instead,
 * deployed with its block map (a sha256 per range): each node writes only the mapped quarter, and with the
 * swarm the wave shares the chunks that hold it (half the image: each shared chunk is half mapped). The
 * case "tls" is a swarm whose peer links are TLS (keyed by the wave's secret): with it, every case's agents
 * dial the conductor over wss:// (a lab CA, pinned) and "on" keeps plain peer links (peer_tls off), so
 * "on" and "tls" differ only in the peer links; --rounds repeats them interleaved. Usage:
 *   node --import tsx scripts/bench/swarm.ts [--size 1024] (MiB) [--bandwidth auto|MiB/s] [--agents 8,16]
 *     [--processes 4] [--cache 128] (MiB per agent) [--cases alone,off,on,tls] [--rounds 1] [--bmap]
 */
import { createHash, randomBytes } from "node:crypto";
import { once } from "node:events";
import { access, open, mkdtemp, readFile, rm, truncate, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { availableParallelism, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { COMMANDS } from "../../agent/commands/registry.ts";
import { SimulatedBackend } from "../../agent/hardware/simulated/simulated-backend.ts";
import { simulatedInventory } from "../../agent/hardware/simulated/sample-inventory.ts";
import { AgentLink } from "../../agent/link/client.ts";
import { createAgentGateway } from "../../conductor/agents/gateway.ts";
import { MemoryAgentDirectory } from "../../conductor/agents/memory-directory.ts";
import { SwarmTracker } from "../../conductor/agents/swarm-tracker.ts";
import { makeLabCa } from "../../conductor/tls/lab-ca.ts";
import { loadTlsMaterial } from "../../conductor/tls/material.ts";
import { silentLogger } from "../../shared/log.ts";
import type { Inventory } from "../../shared/inventory.ts";
import type { SwarmStats } from "../../shared/swarm.ts";
import { exec } from "../../shared/system/exec.ts";
import { fleetMac, fleetUuid } from "./fleet-ids.ts";

const SELF = resolve(import.meta.dirname, "swarm.ts");

interface Row {
  agents: number;
  swarm: boolean;
  /** Peer links over TLS (the "tls" case). */
  peer_tls?: boolean;
  wall_s: number;
  /** CPU seconds the whole machine spent busy, and idle, during the wave (USER_HZ 100). */
  cpu_busy_s: number;
  cpu_idle_s: number;
  /** When the store sent its last byte of the wave, from the wave's start. */
  store_done_s: number;
  store_bytes: number;
  store_images: number;
  peer_images: number;
  bad_chunks: number;
  fallbacks: number;
  /** With the swarm: per-agent figures as [min, median, max] (seconds, or counts). */
  agents_detail?: Record<string, [number, number, number]>;
  /** With the swarm: peers dropped by the wave's agents, counted by reason. */
  drops?: Record<string, number>;
}

/** The machine's busy and idle CPU seconds so far (all cores, every process: /proc/stat). */
async function machineCpu(): Promise<{ busy: number; idle: number }> {
  const line = (await readFile("/proc/stat", "utf8")).split("\n")[0] ?? "";
  const ticks = line.trim().split(/\s+/).slice(1).map(Number);
  const idle = (ticks[3] ?? 0) + (ticks[4] ?? 0);
  const busy = ticks.slice(0, 8).reduce((sum, t) => sum + t, 0) - idle;
  return { busy: busy / 100, idle: idle / 100 };
}

/** [min, median, max] of the values, rounded to 0.1. */
function spread(values: number[]): [number, number, number] {
  const sorted = [...values].sort((a, b) => a - b);
  const round = (v: number | undefined): number => +(v ?? Number.NaN).toFixed(1);
  return [round(sorted[0]), round(sorted[Math.floor(sorted.length / 2)]), round(sorted.at(-1))];
}

/** SHA-256 MiB/s on one core (node:crypto), the best of three passes over 64 MiB. */
function sha256MibPerSecond(): number {
  const buffer = Buffer.alloc(64 * MIB, 0x5a);
  let best = Number.POSITIVE_INFINITY;
  for (let i = 0; i < 3; i++) {
    const started = performance.now();
    createHash("sha256").update(buffer).digest();
    best = Math.min(best, performance.now() - started);
  }
  return 64 / (best / 1000);
}
const MIB = 1024 * 1024;

const { values } = parseArgs({
  options: {
    role: { type: "string", default: "orchestrate" },
    size: { type: "string", default: "1024" },
    /** MiB/s, or auto: from one node's unthrottled rate, so the store and not local CPU sets the pace. */
    bandwidth: { type: "string", default: "auto" },
    agents: { type: "string", default: "8,16" },
    processes: { type: "string", default: "4" },
    cache: { type: "string", default: "128" },
    uploads: { type: "string", default: "4" },
    window: { type: "string", default: "4" },
    port: { type: "string", default: "0" },
    from: { type: "string", default: "0" },
    count: { type: "string", default: "0" },
    dir: { type: "string", default: "" },
    /** A directory: the agent processes write V8 CPU profiles there (node --cpu-prof). */
    profile: { type: "string", default: "" },
    /** Cases to run, among alone, off, on, tls (default: alone,off,on). */
    cases: { type: "string", default: "alone,off,on" },
    /** Times the swarm cases (on, tls) run per agent count, interleaved. */
    rounds: { type: "string", default: "1" },
    /** The agents' pinned CA fingerprint: they dial wss:// (set by the orchestrator for the tls case). */
    pin: { type: "string", default: "" },
    /** The sparse image with its block map: only mapped ranges are written (and fetched, or shared). */
    bmap: { type: "boolean", default: false },
  },
});

function inventoryFor(index: number, disk: string, size: number): Inventory {
  return simulatedInventory({
    macs: [fleetMac(index, "52:54:01")],
    disks: [{ name: disk, size, serial: `SWARM-${index}` }],
  });
}

/** A load process: `count` AgentLinks, each with a simulated machine whose disk is a sparse file. */
async function agentsProcess(): Promise<void> {
  const from = Number(values.from);
  const count = Number(values.count);
  // sparse: only the written blocks take space (root device selection skips disks under 4 GiB)
  const diskBytes = Math.max(8 * 1024 * MIB, (Number(values.size) + 64) * MIB);
  for (let i = from; i < from + count; i++) {
    const disk = join(values.dir, `disk-${i}.img`);
    await writeFile(disk, "");
    await truncate(disk, diskBytes);
    new AgentLink({
      url: `${values.pin === "" ? "ws" : "wss"}://127.0.0.1:${values.port}/v1/agent`,
      ...(values.pin === "" ? {} : { pinnedFingerprint: values.pin }),
      backend: new SimulatedBackend({ inventory: inventoryFor(i, disk, diskBytes) }),
      commands: COMMANDS,
      logger: silentLogger,
      agentVersion: "bench",
      backoff: { initialMs: 200, maxMs: 2_000 },
    }).start();
  }
  // run until killed, or (so that --cpu-prof writes its profile) until the orchestrator leaves a stop file
  const stop = join(values.dir, "stop");
  for (;;) {
    await new Promise((done) => setTimeout(done, 500));
    if (
      await access(stop).then(
        () => true,
        () => false,
      )
    )
      process.exit(0);
  }
}

interface Store {
  url: string;
  served: () => number;
  /** performance.now() of the last byte served. */
  lastServedAt: () => number;
  /** Bytes per second for every connection together (Infinity: unthrottled). */
  setRate: (bytesPerSecond: number) => void;
  close: () => Promise<void>;
}

/** The store: Range-capable, every connection drawing from one token bucket of `bytesPerSecond`. */
async function startStore(
  file: string,
  size: number,
  options: { bytesPerSecond: number; bmap?: string },
): Promise<Store> {
  const { bytesPerSecond, bmap } = options;
  let served = 0;
  let lastServedAt = 0;
  let nextFree = 0;
  let rate = bytesPerSecond;
  const slice = 64 * 1024;
  const handle = await open(file, "r");
  const server = createServer((req, res) => {
    if (bmap !== undefined && (req.url ?? "").split("?")[0]?.endsWith(".bmap")) {
      res.writeHead(200, { "content-length": Buffer.byteLength(bmap) }).end(bmap);
      return;
    }
    void (async () => {
      const match = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? "");
      let start = 0;
      let end = size - 1;
      if (match) {
        start = Number(match[1]);
        end = match[2] === "" ? size - 1 : Math.min(size - 1, Number(match[2]));
      }
      const headers: Record<string, string | number> = {
        "content-length": end - start + 1,
        "accept-ranges": "bytes",
        etag: '"bench"',
      };
      if (match) headers["content-range"] = `bytes ${start}-${end}/${size}`;
      res.writeHead(match ? 206 : 200, headers);
      for (let at = start; at <= end && !res.destroyed; at += slice) {
        const length = Math.min(slice, end - at + 1);
        const now = performance.now();
        const begin = Math.max(now, nextFree);
        nextFree = begin + (length / rate) * 1000;
        if (nextFree - now > 1) await new Promise((done) => setTimeout(done, nextFree - now));
        const buffer = Buffer.allocUnsafe(length);
        await handle.read(buffer, 0, length, at);
        if (!res.write(buffer)) await once(res, "drain");
        served += length;
        lastServedAt = performance.now();
      }
      res.end();
    })().catch(() => res.destroy());
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    served: () => served,
    lastServedAt: () => lastServedAt,
    setRate: (bytesPerSecond) => {
      rate = bytesPerSecond;
      nextFree = 0;
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise((done) => server.close(done));
      await handle.close();
    },
  };
}

async function orchestrate(): Promise<void> {
  const size = Number(values.size) * MIB;
  const counts = values.agents.split(",").map(Number);
  const total = Math.max(...counts);
  const dir = await mkdtemp(join(tmpdir(), "anvil-bench-swarm-"));
  try {
    // 64 KiB of random bytes at the start of every MiB, zeros elsewhere; with --bmap, 2 MiB every 8 MiB
    const image = Buffer.alloc(size);
    const mapped = values.bmap ? bmapRanges(size) : [];
    for (const { start, end } of mapped) randomFill(image.subarray(start, end));
    for (let at = 0; at < size && !values.bmap; at += MIB) {
      const random = createHash("sha512");
      for (let i = 0; i < 1024 && at + i * 64 < size; i++) {
        random.update(`${at}:${i}`);
        random
          .copy()
          .digest()
          .copy(image, at + i * 64);
      }
    }
    const sha256 = createHash("sha256").update(image).digest("hex");
    const file = join(dir, "image.raw");
    await writeFile(file, image);
    const store = await startStore(file, size, {
      bytesPerSecond: Number.POSITIVE_INFINITY,
      ...(values.bmap ? { bmap: blockMapXml(image, mapped) } : {}),
    });

    const directory = new MemoryAgentDirectory();
    for (let i = 0; i < total; i++)
      directory.addNode({ uuid: fleetUuid(i, "9"), macs: [fleetMac(i, "52:54:01")] });
    const tracker = new SwarmTracker({ logger: silentLogger });
    const gateway = createAgentGateway({
      directory,
      logger: silentLogger,
      swarm: tracker,
      maxConnectionsPerSource: total + 8,
      heartbeatTimeoutMs: 120_000,
    });
    const cases = new Set(values.cases.split(","));
    // with the tls case the link is TLS for every case, so that only the peer links differ between on and tls
    const lab = cases.has("tls")
      ? await makeLabCa({ dir: join(dir, "ca"), names: ["127.0.0.1"] })
      : undefined;
    const material = lab && loadTlsMaterial({ cert: lab.cert, key: lab.key, ca: lab.caCert });
    const server = material ? createHttpsServer({ cert: material.cert, key: material.key }) : createServer();
    gateway.attach(server);
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const port = (server.address() as AddressInfo).port;

    const processes = Math.max(1, Math.min(Number(values.processes), total));
    const per = Math.ceil(total / processes);
    const load = new AbortController();
    const profile = values.profile === "" ? [] : ["--cpu-prof", "--cpu-prof-dir", resolve(values.profile)];
    const tsx = [process.execPath, ...profile, "--import", "tsx", SELF];
    const loaders = Array.from({ length: processes }, (_, p) =>
      exec(
        tsx[0] as string,
        [
          ...tsx.slice(1),
          ...["--role", "agents", "--port", String(port), "--dir", dir, "--size", values.size],
          ...["--from", String(p * per), "--count", String(Math.max(0, Math.min(per, total - p * per)))],
          ...(lab ? ["--pin", lab.caFingerprint] : []),
        ],
        { signal: load.signal, timeoutMs: 3 * 3600_000 },
      ).catch(() => undefined),
    );
    while (gateway.sessionNodes().length < total) await new Promise((done) => setTimeout(done, 100));

    let run = 0;
    const wave = async (agents: number, swarm: boolean, peerTls = false): Promise<Row> => {
      run += 1;
      const before = store.served();
      const cpu = await machineCpu();
      const started = performance.now();
      const results = (await Promise.all(
        Array.from({ length: agents }, (_, i) =>
          gateway.call(fleetUuid(i, "9"), {
            name: "write_image",
            args: {
              // a path per run: a wave is never joined by the previous run's lingering agents
              image: {
                url: `${store.url}/run-${run}/image.raw?sig=x`,
                image_type: "whole-disk",
                checksum: { algo: "sha256", value: sha256 },
                ...(values.bmap ? { block_map: `${store.url}/run-${run}/image.bmap` } : {}),
              },
              ...(swarm
                ? {
                    swarm: {
                      cache_bytes: Number(values.cache) * MIB,
                      linger_s: 30,
                      max_uploads: Number(values.uploads),
                      window: Number(values.window),
                      peer_tls: peerTls ? "link" : "off",
                    },
                  }
                : {}),
            },
          }),
        ),
      )) as Array<{ swarm?: SwarmStats; duration_ms?: number }>;
      const seconds = (performance.now() - started) / 1000;
      const cpuAfter = await machineCpu();
      const storeBytes = store.served() - before;
      const peers = results.reduce((sum, r) => sum + (r.swarm?.bytes_from_peers ?? 0), 0);
      const row: Row = {
        agents,
        swarm,
        ...(swarm && lab ? { peer_tls: peerTls } : {}),
        wall_s: +seconds.toFixed(2),
        cpu_busy_s: +(cpuAfter.busy - cpu.busy).toFixed(1),
        cpu_idle_s: +(cpuAfter.idle - cpu.idle).toFixed(1),
        store_done_s: +((store.lastServedAt() - started) / 1000).toFixed(2),
        store_bytes: storeBytes,
        store_images: +(storeBytes / size).toFixed(3),
        peer_images: +(peers / size).toFixed(3),
        bad_chunks: results.reduce((sum, r) => sum + (r.swarm?.bad_chunks ?? 0), 0),
        fallbacks: results.filter((r) => r.swarm?.fallback !== undefined).length,
      };
      if (swarm) {
        const stats = results.map((r) => r.swarm);
        const seconds = (pick: (s: SwarmStats) => number | undefined): [number, number, number] =>
          spread(stats.map((s) => (s === undefined ? Number.NaN : (pick(s) ?? Number.NaN) / 1000)));
        const counts = (pick: (s: SwarmStats) => number | undefined): [number, number, number] =>
          spread(stats.map((s) => (s === undefined ? Number.NaN : (pick(s) ?? Number.NaN))));
        row.agents_detail = {
          write_s: spread(results.map((r) => (r.duration_ms ?? Number.NaN) / 1000)),
          starved_s: seconds((s) => s.starved_ms),
          ask_s: seconds((s) => s.ask_ms),
          peer_s: seconds((s) => s.peer_ms),
          store_s: seconds((s) => s.store_ms),
          chunks_from_store: counts((s) => s.chunks_from_store),
          chunks_from_peers: counts((s) => s.chunks_from_peers),
          busy_answers: counts((s) => s.busy_answers),
          dropped_peers: counts((s) => Object.keys(s.dropped_peers).length),
        };
        row.drops = {};
        for (const reason of stats.flatMap((s) => Object.values(s?.dropped_peers ?? {})))
          row.drops[reason] = (row.drops[reason] ?? 0) + 1;
      }
      process.stderr.write(`${JSON.stringify(row)}\n`);
      if (process.env.SWARM_BENCH_DEBUG)
        process.stderr.write(`${JSON.stringify(results.map((r) => r.swarm))}\n`);
      return row;
    };

    // The machine's own limit: every agent hashes each byte (twice with the swarm: the chunk against its
    // anchor, the image against its checksum) and writes it, on these few cores. One node against an
    // unthrottled store shows what one node's pipeline does here (best of two: the first warms up).
    const cores = availableParallelism();
    const sha = sha256MibPerSecond();
    const unthrottled = Math.min((await wave(1, false)).wall_s, (await wave(1, false)).wall_s);
    const localMibS = Number(values.size) / unthrottled;
    const auto = values.bandwidth === "auto";
    // auto: the store rate at which the largest wave's local floor (every node's pipeline, cores shared)
    // equals one node's time against the store: slower than that and the store sets the pace, as in a rack
    // whose store uplink is far below the sum of its nodes' disks.
    const storeMibS = auto ? Math.max(1, Math.floor((localMibS * cores) / total)) : Number(values.bandwidth);
    store.setRate(storeMibS * MIB);
    const limit = {
      cores,
      sha256_mib_per_s_per_core: Math.round(sha),
      one_node_unthrottled_mib_per_s: Math.round(localMibS),
      store_mib_per_s: storeMibS,
      store_rate_chosen: auto
        ? `one node's unthrottled rate x cores / ${total} nodes: one node alone is store-bound (${Math.round(localMibS)} > ${storeMibS} MiB/s), and ${total} nodes' local work fits in one node's store-bound time`
        : "given (--bandwidth)",
      // seconds no wave can beat here: the store's share, and the local CPU's (each node's pipeline at the
      // unthrottled rate, plus with the swarm one more SHA-256 pass over every byte, on `cores` cores)
      floors_s: Object.fromEntries(
        counts.map((n) => [
          n,
          {
            off: +Math.max(
              (n * Number(values.size)) / storeMibS,
              (n * Number(values.size)) / localMibS / cores,
            ).toFixed(1),
            on: +Math.max(
              Number(values.size) / storeMibS,
              (n * Number(values.size) * (1 / localMibS + 1 / sha)) / cores,
            ).toFixed(1),
          },
        ]),
      ),
    };
    process.stderr.write(`${JSON.stringify({ limit })}\n`);

    const alone = cases.has("alone") ? await wave(1, false) : undefined;
    const rows: Row[] = alone ? [alone] : [];
    for (const agents of counts) {
      if (cases.has("off")) rows.push(await wave(agents, false));
      for (let round = 0; round < Number(values.rounds); round++) {
        if (cases.has("on")) rows.push(await wave(agents, true));
        if (cases.has("tls")) rows.push(await wave(agents, true, true));
      }
    }
    const aloneS = alone?.wall_s ?? Number.NaN;
    const largest = (rows.filter((r) => r.swarm === true).at(-1) ?? { store_images: NaN, wall_s: NaN }) as {
      store_images: number;
      wall_s: number;
    };
    process.stdout.write(
      JSON.stringify(
        {
          image_mib: Number(values.size),
          ...(values.bmap ? { bmap_mapped_images: +((mapped.length * 2 * MIB) / size).toFixed(3) } : {}),
          agent_processes: processes,
          limit,
          rows: rows.map((r) => ({ ...r, x_alone: +(r.wall_s / aloneS).toFixed(2) })),
          goal_store_le_1_5_images: largest.store_images <= 1.5,
          goal_wave_le_2x_alone: largest.wall_s <= 2 * aloneS,
        },
        null,
        2,
      ) + "\n",
    );
    if (profile.length > 0) {
      await writeFile(join(dir, "stop"), "");
      await Promise.race([Promise.all(loaders), new Promise((done) => setTimeout(done, 10_000))]);
    }
    load.abort();
    await Promise.all(loaders);
    await gateway.close();
    server.close();
    tracker.close();
    await store.close();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** --bmap's data: 2 MiB at the start of every 8 MiB (each 4 MiB chunk holding data is half mapped). */
function bmapRanges(size: number): Array<{ start: number; end: number }> {
  const ranges: Array<{ start: number; end: number }> = [];
  for (let at = 0; at < size; at += 8 * MIB) ranges.push({ start: at, end: Math.min(size, at + 2 * MIB) });
  return ranges;
}

function randomFill(target: Buffer): void {
  for (let at = 0; at < target.length; at += 64 * 1024) randomBytes(64 * 1024).copy(target, at);
}

/** A bmaptool 2.0 block map (4 KiB blocks, a sha256 per range) of `image`'s `ranges`. */
function blockMapXml(image: Buffer, ranges: ReadonlyArray<{ start: number; end: number }>): string {
  const block = 4096;
  const lines = ranges.map(({ start, end }) => {
    const digest = createHash("sha256").update(image.subarray(start, end)).digest("hex");
    return `  <Range chksum="${digest}"> ${start / block}-${Math.ceil(end / block) - 1} </Range>`;
  });
  const mappedBlocks = ranges.reduce((n, r) => n + Math.ceil(r.end / block) - r.start / block, 0);
  return [
    `<?xml version="1.0" ?>`,
    `<bmap version="2.0">`,
    `<ImageSize> ${image.length} </ImageSize>`,
    `<BlockSize> ${block} </BlockSize>`,
    `<BlocksCount> ${Math.ceil(image.length / block)} </BlocksCount>`,
    `<MappedBlocksCount> ${mappedBlocks} </MappedBlocksCount>`,
    `<ChecksumType> sha256 </ChecksumType>`,
    `<BlockMap>`,
    ...lines,
    `</BlockMap>`,
    `</bmap>`,
    ``,
  ].join("\n");
}

const roles: Record<string, () => Promise<void>> = { orchestrate, agents: agentsProcess };
const role = roles[values.role];
if (role === undefined) {
  process.stderr.write(`unknown role ${values.role}\n`);
  process.exitCode = 2;
} else {
  role().catch((error: unknown) => {
    process.stderr.write(
      `bench:swarm (${values.role}) failed: ${error instanceof Error ? error.stack : String(error)}\n`,
    );
    process.exitCode = 1;
  });
}
