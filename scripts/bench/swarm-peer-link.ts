/**
 * One swarm peer link, plain HTTP against TLS keyed by the wave's secret: a PeerServer holding 16 chunks of
 * 4 MiB, and a taker fetching them over and over (the real fetchFromPeer: kept-alive connection, body read
 * into a pooled buffer, SHA-256 on arrival) until `--gib` GiB have moved, both ends in this process. Rounds
 * alternate plain and TLS. Prints MB/s and the process's CPU seconds per GiB (both ends: encrypt, decrypt,
 * hash, socket copies). Usage:
 *   node --import tsx scripts/bench/swarm-peer-link.ts [--gib 1] [--rounds 3]
 */
import { randomBytes } from "node:crypto";
import { parseArgs } from "node:util";
import { ChunkCache } from "../../agent/swarm/chunk-cache.ts";
import { PeerConnections, fetchFromPeer } from "../../agent/swarm/peer-fetch.ts";
import { PeerServer } from "../../agent/swarm/peer-server.ts";
import { silentLogger } from "../../shared/log.ts";
import { SWARM_CHUNK_BYTES } from "../../shared/swarm.ts";

const { values } = parseArgs({
  options: { gib: { type: "string", default: "1" }, rounds: { type: "string", default: "3" } },
});
const WAVE = "bench-wave";
const TOKEN = randomBytes(32).toString("base64url");
const CHUNKS = 16;

async function run(tls: boolean): Promise<{ tls: boolean; mb_per_s: number; cpu_s_per_gib: number }> {
  const server = await PeerServer.listen({ host: "127.0.0.1", tls, logger: silentLogger });
  const cache = new ChunkCache(CHUNKS * SWARM_CHUNK_BYTES);
  for (let i = 0; i < CHUNKS; i++) cache.put(i, [randomBytes(SWARM_CHUNK_BYTES)]);
  server.serve(WAVE, TOKEN, cache);
  const connections = new PeerConnections();
  const into = Buffer.allocUnsafeSlow(SWARM_CHUNK_BYTES);
  const total = Number(values.gib) * 1024 ** 3;
  const cpu = process.cpuUsage();
  const started = performance.now();
  let moved = 0;
  for (let i = 0; moved < total; i++) {
    const chunk = await fetchFromPeer({
      url: server.url,
      wave: WAVE,
      token: TOKEN,
      tls,
      index: i % CHUNKS,
      length: SWARM_CHUNK_BYTES,
      stallMs: 10_000,
      connections,
      into,
    });
    moved += chunk.data.length;
  }
  const seconds = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  connections.close();
  await server.close();
  return {
    tls,
    mb_per_s: Math.round(moved / seconds / 1e6),
    cpu_s_per_gib: +((used.user + used.system) / 1e6 / (moved / 1024 ** 3)).toFixed(2),
  };
}

const rows = [];
for (let round = 0; round < Number(values.rounds); round++) {
  for (const tls of [false, true]) {
    const row = await run(tls);
    process.stderr.write(`${JSON.stringify(row)}\n`);
    rows.push(row);
  }
}
process.stdout.write(`${JSON.stringify({ gib: Number(values.gib), rows }, null, 2)}\n`);
