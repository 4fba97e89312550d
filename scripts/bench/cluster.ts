// Cluster benchmark: a large fleet (BENCH_NODES, default 100,000) on PostgreSQL behind three conductors, then
// behind one (BENCH_PG_CONDUCTORS, default "3,1", each on a fresh server), and on SQLite behind one, concurrency
// 8: node create rate, list/detail p99 (detail at 1.78 and at latest), allocations (resource class, traits,
// exact spec) per second with POST→active p50/p99, how fast a race loser is told, conductor RSS. Printed beside
// real Ironic 21.4's figures.
// On one 2-core machine the three conductors share the cores with the server and the client, which the
// one-conductor row shows the cost of (docs/cluster.md). Run it under `flock /tmp/anvil-heavy.lock`.
// BENCH_BASELINE_REV=<revision>: that revision's conductors (extracted with git archive; the fleet seeded by
// its own store code) are measured in every row too, in BENCH_ROUNDS interleaved rounds (default 2: baseline
// first, then this checkout first, …; each measurement on a fresh database), and every figure is printed per
// round with the median of the per-round ratios.
// Conductors run from the esbuild bundle of each checkout (built by this checkout's build, as the installed
// service runs); BENCH_CONDUCTOR=tsx runs the sources through tsx instead. BENCH_CONDUCTOR_NODE_ARGS="…" passes
// flags to every conductor's node process (all sides), as api.ts does.
import { throwawayPostgres } from "./throwaway-postgres.ts";
import { execFile, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Dispatcher, request } from "undici";
import { promisify } from "node:util";
import {
  type Figure,
  type PairedRound,
  compareRounds,
  loadNow,
  printLoad,
  benchCheckouts,
  roundOrder,
} from "./interleave.ts";
import { BENCH_CONDUCTOR_RUN, prepareBenchConductor } from "./conductor-process.ts";
import { closedLoop, spawnListeningConductor } from "./closed-loop.ts";
import { percentile } from "./percentile.ts";
import { processCpuMs } from "./proc-cpu.ts";
import { rssMiB } from "./rss.ts";

/**
 * Real Ironic 21.4.4 (Debian bookworm, 2 API workers + 1 conductor, SQLite, fake-hardware) on this machine
 * kind, from the project's reference notes "ironic-bench.md" (2026-11-22 quiet run and 2026-11-23 side by side).
 */
const IRONIC = {
  createPerS: 92, // POST /v1/nodes ×1,000, concurrency 8 (quiet run)
  listMs: 230, // GET /v1/nodes, first 1,000, at 10,000 nodes
  detailMs: 509, // GET /v1/nodes/detail, first 1,000, at 10,000 nodes
  allocPerS: 5.8, // 500 × resource_class small at 1,000 nodes, concurrency 8
  allocP50Ms: 1400,
  allocP99Ms: 2280,
  allocTraitsPerS: 9.9, // 40 × small + a trait
  raceLoserMs: 4100, // race: 20 × large for 10 free, errors after p50 4.1 s
  rssMiB: 367 + 143, // API 3 processes + conductor at 10,000 nodes
};
const GOALS = {
  allocPerS: 500,
  allocP99Ms: 50,
  raceLoserMs: 50,
  listP99Ms: 50,
  detailP99Ms: 50,
  rssMiB: 300,
};

const NODES = Number(process.env.BENCH_NODES ?? 100_000);
const API_CREATES = Number(process.env.BENCH_API_CREATES ?? 2_000);
const ALLOCATIONS = Number(process.env.BENCH_ALLOCATIONS ?? 1_000);
// 200 detail pages, so that p99 is a percentile (the 2nd slowest) rather than the one slowest request; list
// pages are cheap enough for 1,000 (p99 the 10th slowest: one disturbed moment no longer decides the goal)
const PAGES = Number(process.env.BENCH_PAGES ?? 200);
const LIST_PAGES = Number(process.env.BENCH_LIST_PAGES ?? 1_000);
const CONCURRENCY = 8;
/** Flags for every conductor's node process, as api.ts takes them (`--cpu-prof`, GC flags under test). */
const NODE_ARGS = (process.env.BENCH_CONDUCTOR_NODE_ARGS ?? "").split(" ").filter((arg) => arg !== "");
const BASELINE_REV = process.env.BENCH_BASELINE_REV;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? (BASELINE_REV ? 2 : 1));
const HEADERS = { "Content-Type": "application/json", "X-OpenStack-Ironic-API-Version": "1.78" };

async function call(
  url: string,
  init: { method?: string; body?: unknown; version?: string; unparsed?: boolean } = {},
): Promise<{ status: number; body: unknown }> {
  // undici's request rather than fetch: the client shares the two cores, and fetch's streams cost more
  const response = await request(url, {
    method: (init.method ?? "GET") as Dispatcher.HttpMethod,
    headers:
      init.version === undefined ? HEADERS : { ...HEADERS, "X-OpenStack-Ironic-API-Version": init.version },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  // NOTE: a page's body is read but not parsed: JSON.parse of a 2.5 MB detail page costs the client ~10 ms of
  // the two cores the conductors need, which the next requests' latency would count as the server's
  if (init.unparsed) {
    await response.body.dump({ limit: Infinity });
    return { status: response.statusCode, body: null };
  }
  const text = await response.body.text();
  return { status: response.statusCode, body: text ? (JSON.parse(text) as unknown) : null };
}

/** Runs `count` jobs, CONCURRENCY at a time; returns each job's latency (ms) and the rate. */
const load = (count: number, job: (i: number) => Promise<void>) => closedLoop(count, CONCURRENCY, job);

const spawnConductor = (checkout: string, args: string[]) =>
  spawnListeningConductor(checkout, args, NODE_ARGS);

interface Result {
  store: string;
  conductors: number;
  seedPerS: number;
  createPerS: number;
  list: { perS: number; p50: number; p99: number };
  detail: { perS: number; p50: number; p99: number };
  detailLatest: { perS: number; p50: number; p99: number };
  /** The conductors' CPU (user + system) per page at latest, in ms: what a change to the page's code moves */
  detailLatestCpuMs: number;
  alloc: { perS: number; p50: number; p99: number };
  traits: { perS: number; p50: number; p99: number };
  exact: { perS: number; p50: number; p99: number };
  allActive: boolean;
  raceWon: number;
  raceLoserP50: number;
  raceLoserMax: number;
  rss: number[];
}

/**
 * Runs a module body in `checkout` (its own store code and schema, so a baseline's database is written by
 * the baseline); returns what it prints.
 */
function inCheckout(checkout: string, body: string, args: string[]): Promise<string> {
  const fleet = JSON.stringify(join(checkout, "scripts/bench/fleet.ts"));
  const store = JSON.stringify(join(checkout, "conductor/db/open-store.ts"));
  const code = `const { seedFleet, fakeNode } = await import(${fleet});
const { openStore } = await import(${store});
const [database, arg] = process.argv.slice(1);
${body}`;
  return promisify(execFile)(
    process.execPath,
    ["--import", "tsx", "--input-type=module", "-e", code, ...args],
    {
      cwd: checkout,
      maxBuffer: 1 << 20,
    },
  ).then((out) => out.stdout);
}

const seed = async (checkout: string, database: string): Promise<number> =>
  Number(
    await inCheckout(checkout, "console.log(await seedFleet(database, Number(arg)));", [
      database,
      String(NODES),
    ]),
  );

/** 10 free nodes of `resourceClass`, for the race. */
const raceNodes = (checkout: string, database: string, resourceClass: string): Promise<string> =>
  inCheckout(
    checkout,
    `const store = openStore(database);
for (let i = 0; i < 10; i++) {
  await store.createNode({ ...fakeNode({ driver: "fake-hardware" }), provision_state: "available",
    power_state: "power off", resource_class: arg });
}
await store.close();`,
    [database, resourceClass],
  );

async function measure(
  store: string,
  setup: { database: string; conductors: number; dir: string; checkout: string },
): Promise<Result> {
  const { database, conductors, checkout } = setup;
  // each row's conductors get data directories of their own, not those of the row before
  const dir = mkdtempSync(join(setup.dir, `${store}-${conductors}-`));
  const seedPerS = await seed(checkout, database);
  const children: ChildProcess[] = [];
  try {
    const urls: string[] = [];
    for (let i = 0; i < conductors; i++) {
      const c = await spawnConductor(checkout, [
        ...["--db", database, "--name", `bench-${i}`, "--data-dir", join(dir, `c${i}`)],
        ...["--power-sync-interval", "0", "--log-level", "info"],
      ]);
      children.push(c.child);
      urls.push(c.url);
    }
    const at = (i: number) => urls[i % urls.length]!;

    const create = await load(API_CREATES, async (i) => {
      const r = await call(`${at(i)}/v1/nodes`, { method: "POST", body: { driver: "fake-hardware" } });
      if (r.status !== 201) throw new Error(`create: ${r.status}`);
    });
    const page = (path: string, version?: string) => async (i: number) => {
      if ((await call(`${at(i)}${path}`, { version, unparsed: true })).status !== 200) throw new Error(path);
    };
    // Untimed first pages on each conductor: a process's first list compiles its code paths and statements
    // (once per process lifetime, not per request), which a 40-sample p99 used to report as the list's latency.
    for (let i = 0; i < urls.length * 2; i++) {
      await page("/v1/nodes?limit=1000")(i);
      await page("/v1/nodes/detail?limit=1000")(i);
      await page("/v1/nodes/detail?limit=1000", "latest")(i);
    }
    // and at the clients' concurrency: a database pool opens the connections the timed pages will use
    await load(CONCURRENCY * 4, page("/v1/nodes?limit=1000"));
    const list = await load(LIST_PAGES, page("/v1/nodes?limit=1000"));
    const detail = await load(PAGES, page("/v1/nodes/detail?limit=1000"));
    // at the newest microversion, as the stock CLI and openstacksdk negotiate it: spliced from the stored texts
    const cpuBefore = children.reduce((sum, c) => sum + processCpuMs(c.pid!), 0);
    const detailLatest = await load(PAGES, page("/v1/nodes/detail?limit=1000", "latest"));
    const detailLatestCpuMs =
      (children.reduce((sum, c) => sum + processCpuMs(c.pid!), 0) - cpuBefore) / PAGES;
    let allActive = true;
    const allocate = (body: Record<string, unknown>) => async (i: number) => {
      const r = await call(`${at(i)}/v1/allocations`, { method: "POST", body });
      if ((r.body as { state?: string }).state !== "active") allActive = false;
    };
    const alloc = await load(ALLOCATIONS, allocate({ resource_class: "small" }));
    const traits = await load(200, allocate({ resource_class: "small", traits: ["CUSTOM_FAST"] }));
    const exact = await load(
      200,
      allocate({ resource_class: "small", spec: { memory_mb: 32768, vcpus: 8, match: "exact" } }),
    );

    // the race: 10 free nodes of a fresh class, 20 clients at once across the conductors
    const raceClass = `race-${randomUUID().slice(0, 6)}`;
    await raceNodes(checkout, database, raceClass);
    const race = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const t = performance.now();
        const r = await call(`${at(i)}/v1/allocations`, {
          method: "POST",
          body: { resource_class: raceClass },
        });
        return { state: (r.body as { state: string }).state, ms: performance.now() - t };
      }),
    );
    const losers = race
      .filter((r) => r.state === "error")
      .map((r) => r.ms)
      .sort((a, b) => a - b);
    return {
      store,
      conductors,
      seedPerS,
      createPerS: create.perS,
      list,
      detail,
      detailLatest,
      detailLatestCpuMs,
      alloc,
      traits,
      exact,
      allActive,
      raceWon: race.filter((r) => r.state === "active").length,
      raceLoserP50: percentile(losers, 50),
      raceLoserMax: losers.at(-1) ?? NaN,
      rss: children.map((c) => rssMiB(c.pid!)),
    };
  } finally {
    for (const child of children) child.kill("SIGTERM");
    await new Promise((r) => setTimeout(r, 500));
  }
}

const fmt = (n: number, digits = 0) => n.toFixed(digits);

function report(r: Result): void {
  const rss = Math.max(...r.rss);
  console.log(
    `\n== ${r.store}, ${NODES} nodes, ${r.conductors} conductor(s), client concurrency ${CONCURRENCY} ==`,
  );
  console.log(`seed through the Store (not the API): ${fmt(r.seedPerS)} nodes/s`);
  console.log(
    `node create (API):     ${fmt(r.createPerS)}/s   Ironic ${IRONIC.createPerS}/s  → ×${fmt(r.createPerS / IRONIC.createPerS, 1)}`,
  );
  console.log(
    `list (1,000/page, ${LIST_PAGES} pages): p50 ${fmt(r.list.p50, 1)} ms, p99 ${fmt(r.list.p99, 1)} ms, ${fmt(r.list.perS)} pages/s  Ironic ${IRONIC.listMs} ms (median, at 10^4)  goal p99 < ${GOALS.listP99Ms} ms`,
  );
  console.log(
    `detail (1,000/page):   p50 ${fmt(r.detail.p50, 1)} ms, p99 ${fmt(r.detail.p99, 1)} ms, ${fmt(r.detail.perS)} pages/s  Ironic ${IRONIC.detailMs} ms (median, at 10^4)`,
  );
  console.log(
    `detail at latest:      p50 ${fmt(r.detailLatest.p50, 1)} ms, p99 ${fmt(r.detailLatest.p99, 1)} ms, ${fmt(r.detailLatest.perS)} pages/s, conductors' CPU ${fmt(r.detailLatestCpuMs, 2)} ms/page  goal p99 < ${GOALS.detailP99Ms} ms`,
  );
  const line = (name: string, a: { perS: number; p50: number; p99: number }, ironic: number) =>
    console.log(
      `${name}${fmt(a.perS)}/s, POST→active p50 ${fmt(a.p50, 1)} ms p99 ${fmt(a.p99, 1)} ms   Ironic ${ironic}/s → ×${fmt(a.perS / ironic)}`,
    );
  line("allocations (class):   ", r.alloc, IRONIC.allocPerS);
  line("allocations (+trait):  ", r.traits, IRONIC.allocTraitsPerS);
  line("allocations (exact):   ", r.exact, IRONIC.allocPerS);
  console.log(
    `  Ironic p50 ${IRONIC.allocP50Ms} ms, p99 ${IRONIC.allocP99Ms} ms (at 10^3); goal ≥ ${GOALS.allocPerS}/s, p99 < ${GOALS.allocP99Ms} ms; every allocation active: ${r.allActive}`,
  );
  console.log(
    `race 20 clients / 10 nodes: ${r.raceWon} won; losers told p50 ${fmt(r.raceLoserP50, 1)} ms, max ${fmt(r.raceLoserMax, 1)} ms   Ironic ~${IRONIC.raceLoserMs} ms  goal < ${GOALS.raceLoserMs} ms`,
  );
  console.log(
    `conductor RSS: ${r.rss.map((m) => `${fmt(m)} MiB`).join(", ")}   Ironic ${IRONIC.rssMiB} MiB at 10^4  goal < ${GOALS.rssMiB} MiB (max ${fmt(rss)})`,
  );
}

/** The figures compared between the baseline and this checkout, one line each. */
const FIGURES: Figure<Result>[] = [
  { name: "seed (Store)", unit: "/s", digits: 0, of: (r) => r.seedPerS },
  { name: "node create (API)", unit: "/s", digits: 0, of: (r) => r.createPerS },
  { name: "list p50", unit: "ms", digits: 1, of: (r) => r.list.p50 },
  { name: "list p99", unit: "ms", digits: 1, of: (r) => r.list.p99 },
  { name: "detail p50", unit: "ms", digits: 1, of: (r) => r.detail.p50 },
  { name: "detail p99", unit: "ms", digits: 1, of: (r) => r.detail.p99 },
  { name: "detail latest p50", unit: "ms", digits: 1, of: (r) => r.detailLatest.p50 },
  { name: "detail latest conductor CPU/page", unit: "ms", digits: 2, of: (r) => r.detailLatestCpuMs },
  { name: "detail latest p99", unit: "ms", digits: 1, of: (r) => r.detailLatest.p99 },
  { name: "allocations (class)", unit: "/s", digits: 0, of: (r) => r.alloc.perS },
  { name: "allocation p50", unit: "ms", digits: 1, of: (r) => r.alloc.p50 },
  { name: "allocation p99", unit: "ms", digits: 1, of: (r) => r.alloc.p99 },
  { name: "allocations (+trait)", unit: "/s", digits: 0, of: (r) => r.traits.perS },
  { name: "allocations (exact)", unit: "/s", digits: 0, of: (r) => r.exact.perS },
  { name: "race losers told p50", unit: "ms", digits: 1, of: (r) => r.raceLoserP50 },
  { name: "conductor RSS (max)", unit: "MiB", digits: 0, of: (r) => Math.max(...r.rss) },
];

async function main(): Promise<void> {
  const only = process.env.BENCH_STORES?.split(",") ?? ["postgresql", "sqlite"];
  const pgConductors = (process.env.BENCH_PG_CONDUCTORS ?? "3,1").split(",").map(Number);
  if (!pgConductors.every((n) => Number.isInteger(n) && n > 0))
    throw new Error(`BENCH_PG_CONDUCTORS: conductor counts separated by commas, such as "3,1"`);
  const dir = mkdtempSync(join(tmpdir(), "anvil-cluster-bench-"));
  const checkouts = benchCheckouts(dir, BASELINE_REV);
  /** The rows measured: PostgreSQL behind each conductor count, then SQLite behind one. */
  const rows: { store: "PostgreSQL" | "SQLite"; conductors: number }[] = [
    ...(only.includes("postgresql") ? pgConductors : []).map((n) => ({
      store: "PostgreSQL" as const,
      conductors: n,
    })),
    ...(only.includes("sqlite") ? [{ store: "SQLite" as const, conductors: 1 }] : []),
  ];
  for (const [, checkout] of checkouts) await prepareBenchConductor(checkout);
  console.log(`conductors run as: ${BENCH_CONDUCTOR_RUN}`);
  const compared: [string, PairedRound<Result>[]][] = [];
  printLoad("at start");
  try {
    for (const { store, conductors } of rows) {
      const rounds: PairedRound<Result>[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        const load0 = loadNow();
        const results = new Map<string, Result>();
        for (const [name, checkout] of roundOrder(checkouts, round)) {
          console.log(`\n[round ${round + 1}/${ROUNDS}, ${name}, load ${loadNow().toFixed(2)}]`);
          results.set(name, await measureOn(store, { conductors, dir, checkout }));
          report(results.get(name)!);
        }
        if (checkouts.length === 2)
          rounds.push({
            base: results.get(checkouts[0]![0])!,
            here: results.get(checkouts[1]![0])!,
            load: [load0, loadNow()],
          });
      }
      compared.push([`${store}, ${NODES} nodes, ${conductors} conductor(s)`, rounds]);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  if (BASELINE_REV)
    for (const [title, rounds] of compared) compareRounds(FIGURES, rounds, { title, baseline: BASELINE_REV });
  printLoad("at end");
}

/**
 * One measurement on a fresh database: a throwaway PostgreSQL server (its own temp dir, because the server runs
 * as another user, who cannot enter the bench's private one), or a new SQLite file.
 */
async function measureOn(
  store: "PostgreSQL" | "SQLite",
  setup: { conductors: number; dir: string; checkout: string },
): Promise<Result> {
  if (store === "SQLite") {
    const database = join(mkdtempSync(join(setup.dir, "sqlite-")), "bench.sqlite");
    return measure(store, { ...setup, database });
  }
  const postgres = throwawayPostgres("anvil-cluster-bench-pg-");
  try {
    return await measure(store, { ...setup, database: postgres.start() });
  } finally {
    postgres.stop();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
