import { createHash } from "node:crypto";
import { truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { COMMANDS } from "../../agent/commands/registry.ts";
import { SimulatedBackend } from "../../agent/hardware/simulated/simulated-backend.ts";
import { AgentLink } from "../../agent/link/client.ts";
import type { SwarmTracker } from "../../conductor/agents/swarm-tracker.ts";
import { silentLogger } from "../../shared/log.ts";
import { sampleInventory } from "./agent.ts";
import type { RequestRecord } from "./http-image-server.ts";

/** What the swarm suites share: simulated agents on sparse disk files, and members planted in a wave. */

export interface WaveAgent {
  uuid: string;
  disk: string;
  link: AgentLink;
}

/** Node `i`'s UUID and MAC in a suite tagged `tag` (two hex digits, so suites never share a node). */
export function waveNode(tag: string, i: number): { uuid: string; mac: string } {
  const n = (i + 1).toString(16);
  return {
    uuid: `${tag}000000-0000-4000-8000-${n.padStart(12, "0")}`,
    mac: `52:54:00:${tag}:00:${n.padStart(2, "0")}`,
  };
}

/** Starts `count` agents (nodes 0…count-1 of `tag`) dialling `url`, each with an empty sparse disk in `dir`. */
export async function startWaveAgents(options: {
  url: string;
  tag: string;
  count: number;
  dir: string;
  diskBytes: number;
  pinnedFingerprint?: string;
}): Promise<WaveAgent[]> {
  const agents: WaveAgent[] = [];
  for (let i = 0; i < options.count; i++) {
    const { uuid, mac } = waveNode(options.tag, i);
    const disk = join(options.dir, `disk-${i}-${Date.now()}.img`);
    await writeFile(disk, "");
    await truncate(disk, options.diskBytes);
    const link = new AgentLink({
      url: options.url,
      ...(options.pinnedFingerprint === undefined ? {} : { pinnedFingerprint: options.pinnedFingerprint }),
      backend: new SimulatedBackend({ inventory: sampleInventory({ macs: [mac], diskFile: disk }) }),
      commands: COMMANDS,
      logger: silentLogger,
      agentVersion: "test",
      backoff: { initialMs: 50, maxMs: 200 },
    });
    link.start();
    agents.push({ uuid, disk, link });
  }
  return agents;
}

/**
 * Plants `node` in the wave of the plan's image as the assignee of every chunk, anchoring the hashes of
 * `bytes` cut in `chunkBytes` (the store's bytes for an impostor, wrong ones for a liar). Returns the wave.
 */
export async function claimEveryChunk(
  tracker: SwarmTracker,
  node: string,
  plan: {
    image: string;
    checksum: string;
    size: number;
    endpoint: string;
    bytes: Buffer;
    chunkBytes: number;
  },
): Promise<string> {
  const { bytes, chunkBytes, ...join } = plan;
  const joined = tracker.join(node, join);
  if (joined.kind !== "joined") throw new Error(`${node} could not join the wave`);
  for (let index = 0; index * chunkBytes < bytes.length; index++) {
    const chunk = bytes.subarray(index * chunkBytes, Math.min(bytes.length, (index + 1) * chunkBytes));
    await tracker.ask(node, joined.wave, index);
    const sha256 = createHash("sha256").update(chunk).digest("hex");
    tracker.have(node, { wave: joined.wave, index, sha256, store: true });
  }
  return joined.wave;
}

/** Bytes the store sent for a path, from its request log (a Range answer counts its span). */
export function storeBytes(records: readonly RequestRecord[], path: string, size: number): number {
  let total = 0;
  for (const record of records) {
    if (record.path !== path) continue;
    if (record.status === 200) total += size;
    const match = /^bytes=(\d+)-(\d*)$/.exec(record.range ?? "");
    if (record.status !== 206 || !match) continue;
    const end = match[2] === "" ? size - 1 : Math.min(Number(match[2]), size - 1);
    total += end - Number(match[1]) + 1;
  }
  return total;
}
