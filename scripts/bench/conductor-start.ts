/**
 * How a conductor is run, compared: start time (spawn → listening), resident memory idle and after a small
 * workload (BENCH_NODES creates at concurrency 8, then detail pages), and the detail page's p50, so that a
 * memory saving that slows the API shows. Each variant is `run[:node flag …]`, where run is `tsx` (the sources
 * through tsx's loader), `built` (the esbuild bundle) or `built-ext` (a bundle that leaves npm packages to node's
 * resolver) or a path to another bundle (`build/main-c23342b/main.js`: another revision built; the path has no
 * `:`); a flag written NAME=value is put in the conductor's environment instead (built:MALLOC_ARENA_MAX=2);
 * the first variant is the baseline. Rounds are interleaved (the order rotates every round), each on a fresh
 * database.
 * Usage: flock /tmp/anvil-heavy.lock node --import tsx scripts/bench/conductor-start.ts \
 *          [--variants tsx,built,built:--max-semi-space-size=4] [--rounds 4] [--nodes 2000]
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { Agent } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { buildConductor } from "../build/conductor.ts";
import { prepareBenchConductor, startBenchConductor } from "./conductor-process.ts";
import { type Figure, compareRounds, loadNow, printLoad } from "./interleave.ts";
import { percentile } from "./percentile.ts";
import { rssMiB } from "./rss.ts";
import { ironicCall } from "./ironic-call.ts";

const { values } = parseArgs({
  options: {
    variants: { type: "string", default: "tsx,built,built-ext" },
    rounds: { type: "string", default: "4" },
    nodes: { type: "string", default: "2000" },
    pages: { type: "string", default: "20" },
  },
});
const VARIANTS = values.variants.split(",");
const ROUNDS = Number(values.rounds);
const NODES = Number(values.nodes);
const PAGES = Number(values.pages);
const EXT_DIR = "build/conductor-ext";

interface Measured {
  startMs: number;
  idleRss: number;
  rss: number;
  createPerS: number;
  detailP50: number;
}

const FIGURES: Figure<Measured>[] = [
  { name: "start → listening", unit: "ms", digits: 0, of: (m) => m.startMs },
  { name: "RSS idle", unit: "MiB", digits: 1, of: (m) => m.idleRss },
  { name: `RSS after ${NODES} nodes`, unit: "MiB", digits: 1, of: (m) => m.rss },
  { name: "POST /v1/nodes", unit: "/s", digits: 0, of: (m) => m.createPerS },
  { name: "detail limit=1000 p50", unit: "ms", digits: 1, of: (m) => m.detailP50 },
];

const agent = new Agent({ keepAlive: true, maxSockets: 8 });

async function call(url: string, method: string, body?: unknown): Promise<number> {
  return (await ironicCall(url, method, { agent, version: "latest", body, keepBody: false })).status;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function measure(variant: string, dir: string): Promise<Measured> {
  const [run, ...parts] = variant.split(":");
  // NAME=value parts are the process's environment (MALLOC_ARENA_MAX=2), the rest node's own flags
  const nodeArgs = parts.filter((part) => part.startsWith("-"));
  const env = Object.fromEntries(
    parts.filter((part) => !part.startsWith("-")).map((part) => part.split("=", 2) as [string, string]),
  );
  const started = performance.now();
  const { child, url } = await startBenchConductor(dir, {
    run: run === "tsx" ? "tsx" : "built",
    entry: run === "built-ext" ? `${EXT_DIR}/main.js` : run?.endsWith(".js") ? run : undefined,
    nodeArgs,
    env,
  });
  try {
    const startMs = performance.now() - started;
    await sleep(1000);
    const idleRss = rssMiB(child.pid ?? 0);
    let next = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < NODES) {
          const i = next++;
          const status = await call(`${url}/v1/nodes`, "POST", {
            name: `n-${i}`,
            driver: "fake-hardware",
            resource_class: "small",
            properties: { cpus: 8, memory_mb: 16384, local_gb: 200, cpu_arch: "x86_64" },
            driver_info: { ipmi_address: `10.0.${i >> 8}.${i & 255}`, ipmi_password: "secret" },
          });
          if (status !== 201) throw new Error(`create: ${status}`);
        }
      }),
    );
    const createPerS = NODES / ((performance.now() - t0) / 1000);
    const times: number[] = [];
    for (let i = 0; i < PAGES; i++) {
      const t = performance.now();
      if ((await call(`${url}/v1/nodes/detail?limit=1000`, "GET")) !== 200) throw new Error("detail");
      times.push(performance.now() - t);
    }
    times.sort((a, b) => a - b);
    return { startMs, idleRss, rss: rssMiB(child.pid ?? 0), createPerS, detailP50: percentile(times, 50) };
  } finally {
    child.kill("SIGTERM");
    await new Promise((resolve) => child.once("exit", resolve));
  }
}

async function main(): Promise<void> {
  printLoad("at start");
  // built before any timing: startBenchConductor builds a checkout's bundle on its first start
  await prepareBenchConductor(undefined, "built");
  if (VARIANTS.some((v) => v.startsWith("built-ext")))
    await buildConductor({ outDir: EXT_DIR, externalPackages: true });
  const root = mkdtempSync(join(tmpdir(), "anvil-start-"));
  const results = new Map<string, Measured[]>(VARIANTS.map((v) => [v, []]));
  const loads: [number, number][] = [];
  try {
    for (let round = 0; round < ROUNDS; round++) {
      const load0 = loadNow();
      const order = VARIANTS.map((_, i) => VARIANTS[(i + round) % VARIANTS.length]!);
      for (const variant of order) {
        const dir = join(root, `${round}-${variant.replace(/\W+/g, "-")}`);
        mkdirSync(dir);
        const m = await measure(variant, dir);
        console.log(
          `round ${round + 1} ${variant.padEnd(40)} start ${m.startMs.toFixed(0)} ms, RSS idle ${m.idleRss.toFixed(1)} / after ${m.rss.toFixed(1)} MiB, ${m.createPerS.toFixed(0)} creates/s, detail p50 ${m.detailP50.toFixed(1)} ms`,
        );
        results.get(variant)!.push(m);
      }
      loads.push([load0, loadNow()]);
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
    agent.destroy();
  }
  const [baseline, ...others] = VARIANTS;
  for (const variant of others)
    compareRounds(
      FIGURES,
      results.get(variant)!.map((here, i) => ({ base: results.get(baseline!)![i]!, here, load: loads[i]! })),
      { title: `conductor run as ${variant}`, baseline: baseline! },
    );
  printLoad("at end");
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
