// The short node list at scale: one conductor on a SQLite fleet of BENCH_NODES (default 100,000), or with
// BENCH_STORE=postgresql three conductors (BENCH_CONDUCTORS) on one throwaway PostgreSQL server; 8 clients
// fetch and parse `GET /v1/nodes?limit=1000` (the stock CLI's `node list` page) round-robin, BENCH_PAGES pages
// a round. Prints p50/p99, pages/s, the conductors' CPU per page and their own time per request. With
// BENCH_BASELINE_REV=<revision> the conductors of that revision (extracted with git archive) serve the same
// fleet in BENCH_ROUNDS interleaved rounds (baseline first, then this checkout first, …), so the machine's other
// load hits both alike; every figure is printed per round with the median per-round ratio. Run it under
// `flock /tmp/anvil-heavy.lock`.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { processCpuMs, serverCpuMs } from "./proc-cpu.ts";
import { closedLoop } from "./closed-loop.ts";
import { copyFileSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { Pool, request } from "undici";
import { seedFleet } from "./fleet.ts";
import { throwawayPostgres } from "./throwaway-postgres.ts";
import {
  type Figure,
  type PairedRound,
  compareRounds,
  loadNow,
  printLoad,
  roundOrder,
} from "./interleave.ts";
import { percentile } from "./percentile.ts";

const NODES = Number(process.env.BENCH_NODES ?? 100_000);
const PAGES = Number(process.env.BENCH_PAGES ?? 400);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const BASELINE_REV = process.env.BENCH_BASELINE_REV;
const POSTGRES = process.env.BENCH_STORE === "postgresql";
const CONDUCTORS = Number(process.env.BENCH_CONDUCTORS ?? (POSTGRES ? 3 : 1));
const CONCURRENCY = 8;
const HEADERS = { "X-OpenStack-Ironic-API-Version": "1.78" };

/** This process's CPU milliseconds (the clients'). */
const clientCpuMs = (): number => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
};

interface Round {
  /** every page's latency, sorted (the rounds pooled give the p99 of all pages) */
  times: number[];
  p50: number;
  p99: number;
  perS: number;
  cpuPerPage: number;
  /** the clients' (this process's) and the database server's CPU per page: where the rest of the cores went */
  clientCpuPerPage: number;
  serverCpuPerPage: number;
  /** the conductor's own time from request to response, whole milliseconds */
  servedP50: number;
  servedP99: number;
}

interface Conductor {
  child: ChildProcess;
  url: string;
}

/** Starts a conductor of `checkout`; `served` collects its own time per list request (its debug log line). */
async function startConductor(
  checkout: string,
  args: string[],
  served: { on: boolean; ms: number[] },
): Promise<Conductor> {
  const child = spawn(
    process.execPath,
    [
      // BENCH_CPU_PROF=<dir>: a V8 CPU profile of each conductor, to see where a page's time goes
      ...(process.env.BENCH_CPU_PROF ? ["--cpu-prof", `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : []),
      ...["--import", "tsx", "conductor/main.ts", "--port", "0", ...args],
      ...["--power-sync-interval", "0", "--log-level", "debug"],
    ],
    { cwd: checkout, stdio: ["ignore", "ignore", "pipe"] },
  );
  const url = await new Promise<string>((ok, fail) => {
    createInterface({ input: child.stderr! }).on("line", (line) => {
      const match = /"url":"(http:\/\/[^"]+)"/.exec(line);
      if (match?.[1]) ok(match[1]);
      const ms = /"url":"\/v1\/nodes".*"ms":(\d+)/.exec(line);
      if (served.on && ms?.[1]) served.ms.push(Number(ms[1]));
    });
    child.on("exit", (code) => fail(new Error(`conductor exited ${code}`)));
  });
  return { child, url };
}

async function round(
  checkout: string,
  fleet: { database: string; dir: string; serverDataDir: string | undefined },
): Promise<Round> {
  const { database, dir, serverDataDir } = fleet;
  const served = { on: false, ms: [] as number[] };
  const conductors: Conductor[] = [];
  try {
    let db = database;
    if (!database.startsWith("postgresql://")) {
      db = join(dir, "round.sqlite");
      copyFileSync(database, db);
    }
    for (let i = 0; i < CONDUCTORS; i++) {
      const args = ["--db", db, "--name", `list-${i}`, "--data-dir", join(dir, `data-${i}`)];
      conductors.push(await startConductor(checkout, args, served));
    }
    const pools = conductors.map((c) => new Pool(c.url, { connections: CONCURRENCY }));
    let turn = 0;
    const page = async (): Promise<void> => {
      const i = turn++ % conductors.length;
      // undici's request rather than fetch: the client shares the two cores, and fetch's streams cost more
      const response = await request(`${conductors[i]!.url}/v1/nodes?limit=1000`, {
        headers: HEADERS,
        dispatcher: pools[i]!,
      });
      const body = JSON.parse(await response.body.text()) as { nodes?: unknown[]; next?: string };
      if (response.statusCode !== 200 || body.nodes?.length !== 1000 || !body.next)
        throw new Error("bad page");
    };
    // untimed: a process's first pages compile its code paths and statements; then the clients' concurrency,
    // so each conductor's database pool has the connections the timed pages use (opening one cost the first
    // timed pages 50–120 ms, which a 400-page p99 reported as the list's latency)
    for (let i = 0; i < 20 * conductors.length; i++) await page();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        for (let i = 0; i < 10; i++) await page();
      }),
    );
    served.on = true;
    const cpu = () => conductors.reduce((sum, c) => sum + processCpuMs(c.child.pid!), 0);
    const serverCpu = () => (serverDataDir === undefined ? 0 : serverCpuMs(serverDataDir));
    const [cpu0, client0, server0] = [cpu(), clientCpuMs(), serverCpu()];
    const timed = await closedLoop(PAGES, CONCURRENCY, page);
    const cpuPerPage = (cpu() - cpu0) / PAGES;
    const clientCpuPerPage = (clientCpuMs() - client0) / PAGES;
    const serverCpuPerPage = (serverCpu() - server0) / PAGES;
    await Promise.all(pools.map((p) => p.close()));
    const ms = served.ms.sort((a, b) => a - b);
    return {
      ...timed,
      cpuPerPage,
      clientCpuPerPage,
      serverCpuPerPage,
      servedP50: percentile(ms, 50),
      servedP99: percentile(ms, 99),
    };
  } finally {
    for (const c of conductors) c.child.kill("SIGINT");
    await Promise.all(conductors.map((c) => new Promise((done) => c.child.once("exit", done))));
  }
}

const FIGURES: Figure<Round>[] = [
  { name: "list page p50", unit: "ms", digits: 1, of: (r) => r.p50 },
  { name: "list page p99", unit: "ms", digits: 1, of: (r) => r.p99 },
  { name: "pages per second", unit: "/s", digits: 0, of: (r) => r.perS },
  { name: "conductors' CPU per page", unit: "ms", digits: 2, of: (r) => r.cpuPerPage },
  { name: "inside a conductor p50", unit: "ms", digits: 0, of: (r) => r.servedP50 },
];

const show = (r: Round) =>
  `p50 ${r.p50.toFixed(1)} ms, p99 ${r.p99.toFixed(1)} ms, ${r.perS.toFixed(0)} pages/s, conductors' CPU ${r.cpuPerPage.toFixed(2)} ms/page (clients ${r.clientCpuPerPage.toFixed(2)}${POSTGRES ? `, server ${r.serverCpuPerPage.toFixed(2)}` : ""}); inside a conductor p50 ${r.servedP50} ms, p99 ${r.servedP99} ms`;

async function main(): Promise<void> {
  printLoad("at start");
  const dir = mkdtempSync(join(tmpdir(), "anvil-list-bench-"));
  // its own temp dir: the server runs as another user, who cannot enter the bench's private one
  const postgres = throwawayPostgres("anvil-list-bench-pg-");
  try {
    // lists change nothing: every round reads the same fleet (SQLite: a copy each round)
    const fleet = POSTGRES ? postgres.start() : join(dir, "fleet.sqlite");
    console.log(`seeding ${NODES} nodes: ${(await seedFleet(fleet, NODES)).toFixed(0)}/s`);
    const checkouts: [string, string][] = [["this checkout", resolve(".")]];
    if (BASELINE_REV) {
      const base = join(dir, "baseline");
      execFileSync("bash", ["-c", `mkdir -p ${base} && git archive ${BASELINE_REV} | tar -x -C ${base}`]);
      symlinkSync(resolve("node_modules"), join(base, "node_modules"));
      checkouts.unshift([`baseline ${BASELINE_REV}`, base]);
    }
    const results = new Map<string, Round[]>(checkouts.map(([name]) => [name, []]));
    const paired: PairedRound<Round>[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const load0 = loadNow();
      for (const [name, checkout] of roundOrder(checkouts, i)) {
        const r = await round(checkout, {
          database: fleet,
          dir,
          serverDataDir: POSTGRES ? join(postgres.dir, "data") : undefined,
        });
        results.get(name)!.push(r);
        console.log(`round ${i + 1}, ${name} (load ${loadNow().toFixed(2)}): ${show(r)}`);
      }
      if (checkouts.length === 2)
        paired.push({
          base: results.get(checkouts[0]![0])!.at(-1)!,
          here: results.get(checkouts[1]![0])!.at(-1)!,
          load: [load0, loadNow()],
        });
    }
    // the median round of each (by p99), so one disturbed round does not decide
    const median = (rounds: Round[]) =>
      [...rounds].sort((a, b) => a.p99 - b.p99)[Math.floor(rounds.length / 2)]!;
    const where = `${CONDUCTORS} conductor(s) on ${POSTGRES ? "PostgreSQL" : "SQLite"}`;
    console.log(`\n${NODES} nodes, ${where}, ${CONCURRENCY} clients, 1,000 nodes a page; goal p99 < 50 ms`);
    for (const [name, rounds] of results) {
      console.log(`${name} (median round): ${show(median(rounds))}`);
      const all = rounds.flatMap((r) => r.times).sort((a, b) => a - b);
      const at = (p: number) => percentile(all, p).toFixed(1);
      console.log(
        `  all ${all.length} pages of the ${rounds.length} rounds: p50 ${at(50)} ms, p99 ${at(99)} ms`,
      );
    }
    if (BASELINE_REV)
      compareRounds(FIGURES, paired, {
        title: `list pages, ${NODES} nodes, ${where}`,
        baseline: BASELINE_REV,
      });
  } finally {
    postgres.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  printLoad("at end");
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
