// Detail pages at the newest microversion on the PostgreSQL cluster, alone: one fleet (BENCH_NODES, default
// 100,000) seeded once, then BENCH_CONDUCTORS (default 3) conductors of this checkout and of BENCH_BASELINE_REV in
// BENCH_ROUNDS interleaved rounds (default 3) on that same database, 8 clients reading BENCH_PAGES pages (default
// 400) of 1,000. Prints latency, pages/s and the CPU each party spent per page (conductors, PostgreSQL's
// processes, this client), which is what a change to the page's code moves; cluster.ts measures the page among
// its other figures, each side on a fresh database, where the tail moves with everything else the run does.
// The baseline must read this checkout's schema (its conductors start on the database this checkout seeded).
// Run it under `flock /tmp/anvil-heavy.lock`.
import { execFileSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { request } from "undici";
import { prepareBenchConductor } from "./conductor-process.ts";
import { seedFleet } from "./fleet.ts";
import {
  type Figure,
  type PairedRound,
  compareRounds,
  loadNow,
  printLoad,
  benchCheckouts,
  roundOrder,
} from "./interleave.ts";
import { closedLoop, spawnListeningConductor } from "./closed-loop.ts";
import { processCpuMs, serverCpuMs } from "./proc-cpu.ts";
import { throwawayPostgres } from "./throwaway-postgres.ts";

const NODES = Number(process.env.BENCH_NODES ?? 100_000);
const CONDUCTORS = Number(process.env.BENCH_CONDUCTORS ?? 3);
const PAGES = Number(process.env.BENCH_PAGES ?? 400);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const BASELINE_REV = process.env.BENCH_BASELINE_REV;
const CONCURRENCY = 8;
const PATH = "/v1/nodes/detail?limit=1000";
const HEADERS = { "X-OpenStack-Ironic-API-Version": "latest" };

interface Result {
  perS: number;
  p50: number;
  p99: number;
  conductorCpuMs: number;
  postgresCpuMs: number;
  clientCpuMs: number;
}

async function page(url: string): Promise<void> {
  const response = await request(`${url}${PATH}`, { headers: HEADERS });
  // read, not parsed: a parse would put the client's CPU in the conductors' latency
  await response.body.dump({ limit: Infinity });
  if (response.statusCode !== 200) throw new Error(`${PATH}: ${response.statusCode}`);
}

/** `count` pages, CONCURRENCY at a time, handed to the conductors in turn. */
const load = (urls: readonly string[], count: number) =>
  closedLoop(count, CONCURRENCY, (i) => page(urls[i % urls.length]!));

/** One side: its conductors on the shared database (`server`: its URL and data directory), files in `dir`. */
async function measure(
  checkout: string,
  server: { database: string; dataDir: string },
  dir: string,
): Promise<Result> {
  const { database, dataDir } = server;
  const conductors: { child: ChildProcess; url: string }[] = [];
  try {
    for (let i = 0; i < CONDUCTORS; i++)
      conductors.push(
        await spawnListeningConductor(checkout, [
          ...["--db", database, "--name", `detail-${i}`, "--data-dir", mkdtempSync(join(dir, "c-"))],
          ...["--power-sync-interval", "0", "--log-level", "info"],
        ]),
      );
    const urls = conductors.map((c) => c.url);
    // untimed: each process compiles its code paths and opens its pool's connections first
    for (let i = 0; i < urls.length * 3; i++) await page(urls[i % urls.length]!);
    await load(urls, CONCURRENCY * 8);
    const cpu = () => conductors.reduce((sum, c) => sum + processCpuMs(c.child.pid!), 0);
    const [conductor0, postgres0, client0] = [cpu(), serverCpuMs(dataDir), process.cpuUsage()];
    const timed = await load(urls, PAGES);
    const client = process.cpuUsage(client0);
    return {
      ...timed,
      conductorCpuMs: (cpu() - conductor0) / PAGES,
      postgresCpuMs: (serverCpuMs(dataDir) - postgres0) / PAGES,
      clientCpuMs: (client.user + client.system) / 1000 / PAGES,
    };
  } finally {
    for (const c of conductors) c.child.kill();
  }
}

const FIGURES: Figure<Result>[] = [
  { name: "pages/s", unit: "/s", digits: 0, of: (r) => r.perS },
  { name: "p50", unit: "ms", digits: 1, of: (r) => r.p50 },
  { name: "p99", unit: "ms", digits: 1, of: (r) => r.p99 },
  { name: "conductors' CPU/page", unit: "ms", digits: 2, of: (r) => r.conductorCpuMs },
  { name: "PostgreSQL's CPU/page", unit: "ms", digits: 2, of: (r) => r.postgresCpuMs },
  { name: "client's CPU/page", unit: "ms", digits: 2, of: (r) => r.clientCpuMs },
];

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "anvil-detail-cpu-"));
  const checkouts = benchCheckouts(dir, BASELINE_REV);
  const postgres = throwawayPostgres("anvil-detail-cpu-pg-");
  try {
    const database = postgres.start();
    console.log(`seeded ${NODES} nodes at ${Math.round(await seedFleet(database, NODES))}/s`);
    // the seed's own analysis and vacuum, now rather than inside a round
    execFileSync("psql", [database, "-qc", "VACUUM ANALYZE"]);
    for (const [, checkout] of checkouts) await prepareBenchConductor(checkout);
    printLoad("at start");
    const rounds: PairedRound<Result>[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const load0 = loadNow();
      const results = new Map<string, Result>();
      for (const [name, checkout] of roundOrder(checkouts, round)) {
        const r = await measure(checkout, { database, dataDir: join(postgres.dir, "data") }, dir);
        results.set(name, r);
        console.log(
          `[round ${round + 1}/${ROUNDS}, ${name}] p50 ${r.p50.toFixed(1)} ms, p99 ${r.p99.toFixed(1)} ms, ` +
            `${r.perS.toFixed(0)} pages/s; CPU per page: conductors ${r.conductorCpuMs.toFixed(2)} ms, ` +
            `PostgreSQL ${r.postgresCpuMs.toFixed(2)} ms, client ${r.clientCpuMs.toFixed(2)} ms`,
        );
      }
      if (checkouts.length === 2)
        rounds.push({
          base: results.get(checkouts[0]![0])!,
          here: results.get(checkouts[1]![0])!,
          load: [load0, loadNow()],
        });
    }
    if (BASELINE_REV)
      compareRounds(FIGURES, rounds, {
        title: `detail at latest, PostgreSQL, ${NODES} nodes, ${CONDUCTORS} conductor(s), ${PAGES} pages`,
        baseline: BASELINE_REV,
      });
    printLoad("at end");
  } finally {
    postgres.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
