// API benchmark: 10,000 nodes created through the API (concurrency 8), then list/detail/show latencies and the
// conductor's RSS, printed beside real Ironic 21.4 measured on this machine kind (shared/reference/ironic-bench.md).
// BENCH_AUTH=token: the conductor runs http_basic and every call carries a bearer token.
// BENCH_BASELINE_REV=<revision>[,<revision>…]: each revision's conductor (extracted with git archive) is measured
// too, in the same run, in BENCH_ROUNDS interleaved rounds (default 4: baselines first, then this checkout first,
// …), each round on a fresh database; every figure is printed per round with the median per-round ratio against
// each baseline. Node creation is also given for the first 1,000 creates and for the rest apart (a rate that
// falls as the table grows shows there).
// GET /v1/nodes/detail is timed at 1.78 and at `latest` (the newest, as clients negotiate it).
// The conductor's RSS is read right after the last request and again after BENCH_IDLE_S (default 12) seconds
// without requests (what an operator sees between bursts: the conductor compacts its heap once it is quiet).
// BENCH_NODES (default 10,000), BENCH_SAMPLES (default 30) and BENCH_SHOW_SAMPLES (default 200) size the run;
// BENCH_CONDUCTOR_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/p" passes flags to every conductor's node process.
// Conductors run from the esbuild bundle of each checkout (baselines built by this checkout's build), as the
// installed service runs; BENCH_CONDUCTOR=tsx runs the sources through tsx instead. A baseline written
// `<revision>:tsx` (or `:built`) runs that way whatever BENCH_CONDUCTOR says: `BENCH_BASELINE_REV=db27671:tsx`
// compares a revision as it used to run with this checkout built, `HEAD:tsx` this checkout's code both ways;
// more fields are node flags for that side (`HEAD:built:--max-semi-space-size=2`). `<revision>:own` runs it built
// by its own build script (a change to the build measured against the revision as it built itself).
import bcrypt from "bcryptjs";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Agent } from "node:http";
import {
  BENCH_CONDUCTOR_RUN,
  type ConductorRun,
  prepareBenchConductor,
  startBenchConductor,
} from "./conductor-process.ts";
import {
  type Figure,
  type PairedRound,
  compareRounds,
  loadNow,
  printLoad,
  roundOrder,
} from "./interleave.ts";
import { percentile } from "./percentile.ts";
import { closedLoop } from "./closed-loop.ts";
import { rssMiB } from "./rss.ts";
import { type BenchAnswer, ironicCall } from "./ironic-call.ts";

const NODES = Number(process.env.BENCH_NODES ?? 10_000);
const CONCURRENCY = 8;
const SAMPLES = Number(process.env.BENCH_SAMPLES ?? 30);
/** Seconds without requests before the second RSS reading. */
const IDLE_S = Number(process.env.BENCH_IDLE_S ?? 12);

const AUTH = process.env.BENCH_AUTH === "token" ? "token" : "noauth";
const BASELINE_REVS = (process.env.BENCH_BASELINE_REV ?? "").split(",").filter((rev) => rev !== "");
/** The creates timed apart as "first" (the rest are "next"). */
const FIRST = Math.min(1000, NODES);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? (BASELINE_REVS.length > 0 ? 4 : 1));
const NODE_ARGS = (process.env.BENCH_CONDUCTOR_NODE_ARGS ?? "").split(" ").filter((arg) => arg !== "");

const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
/** Sent with every call (the bearer token once issued). */
const auth: Record<string, string> = {};

/** `method` is "GET" or "POST", "GET latest" asks for the newest microversion (else 1.78). */
/** `method` may end in " latest" for that microversion; 1.78 otherwise. */
function call(url: string, method: string, body?: unknown): Promise<BenchAnswer> {
  const [verb = method, version] = method.split(" ");
  return ironicCall(url, verb, { agent, version: version ?? "1.78", headers: auth, body });
}

async function timed(
  samples: number,
  fn: () => Promise<void>,
): Promise<{ p50: number; p99: number; rps: number }> {
  const times: number[] = [];
  const started = performance.now();
  for (let i = 0; i < samples; i++) {
    const t = performance.now();
    await fn();
    times.push(performance.now() - t);
  }
  const total = (performance.now() - started) / 1000;
  times.sort((a, b) => a - b);
  return { p50: percentile(times, 50), p99: percentile(times, 99), rps: samples / total };
}

/** http_basic with one admin, and a bearer token for it issued through the API. */
function authArgs(dir: string): string[] {
  if (AUTH === "noauth") return [];
  const userFile = join(dir, "htpasswd");
  writeFileSync(userFile, `ops:${bcrypt.hashSync("ops-pass", 4)}\n`);
  return ["--auth-strategy", "http_basic", "--http-basic-auth-user-file", userFile];
}

async function issueToken(url: string): Promise<void> {
  if (AUTH === "noauth") return;
  delete auth.Authorization;
  auth.Authorization = `Basic ${Buffer.from("ops:ops-pass").toString("base64")}`;
  const issued = await call(`${url}/v1/auth/tokens`, "POST");
  if (issued.status !== 201) throw new Error(`token not issued: ${issued.status} ${issued.text}`);
  auth.Authorization = `Bearer ${(JSON.parse(issued.text) as { token: string }).token}`;
}

type Timed = { p50: number; p99: number; rps: number };
/** One checkout's figures in one round. */
interface Measured {
  createRate: number;
  /** Creates per second over the first FIRST creates, and over the rest. */
  firstRate: number;
  nextRate: number;
  list: Timed;
  detail: Timed;
  /** The same page at the newest microversion (`latest`, as clients negotiate): written from stored texts. */
  detailNewest: Timed;
  one: Timed;
  rss: number;
  /** The RSS again after IDLE_S seconds without requests. */
  rssIdle: number;
}

const FIGURES: Figure<Measured>[] = [
  { name: "POST /v1/nodes (concurrency 8)", unit: "/s", digits: 0, of: (m) => m.createRate },
  { name: `POST /v1/nodes, first ${FIRST}`, unit: "/s", digits: 0, of: (m) => m.firstRate },
  { name: `POST /v1/nodes, next ${NODES - FIRST}`, unit: "/s", digits: 0, of: (m) => m.nextRate },
  { name: "GET /v1/nodes?limit=1000 p50", unit: "ms", digits: 1, of: (m) => m.list.p50 },
  { name: "GET /v1/nodes?limit=1000 p99", unit: "ms", digits: 1, of: (m) => m.list.p99 },
  { name: "GET /v1/nodes/detail p50", unit: "ms", digits: 1, of: (m) => m.detail.p50 },
  { name: "GET /v1/nodes/detail p99", unit: "ms", digits: 1, of: (m) => m.detail.p99 },
  { name: "GET /v1/nodes/detail latest p50", unit: "ms", digits: 1, of: (m) => m.detailNewest.p50 },
  { name: "GET /v1/nodes/detail latest p99", unit: "ms", digits: 1, of: (m) => m.detailNewest.p99 },
  { name: "GET /v1/nodes/{id} p50", unit: "ms", digits: 3, of: (m) => m.one.p50 },
  { name: "GET /v1/nodes/{id} p99", unit: "ms", digits: 3, of: (m) => m.one.p99 },
  { name: "GET /v1/nodes/{id} 1 client", unit: "req/s", digits: 0, of: (m) => m.one.rps },
  { name: "conductor RSS", unit: "MiB", digits: 0, of: (m) => m.rss },
  { name: `conductor RSS, ${IDLE_S} s idle`, unit: "MiB", digits: 0, of: (m) => m.rssIdle },
];

async function main(): Promise<void> {
  printLoad("at start");
  const root = mkdtempSync(join(tmpdir(), "anvil-bench-"));
  const checkouts: [string, Side][] = [];
  for (const spec of BASELINE_REVS) {
    const [rev = spec, mode, ...flags] = spec.split(":");
    const base = join(root, `baseline-${spec.replace(/\W+/g, "-")}`);
    mkdirSync(base);
    execFileSync("bash", ["-c", 'git archive "$1" | tar -x -C "$2"', "bash", rev, base]);
    symlinkSync(resolve("node_modules"), join(base, "node_modules"));
    const run: ConductorRun =
      mode === "tsx" ? mode : mode === "built" || mode === "own" ? "built" : BENCH_CONDUCTOR_RUN;
    if (mode === "own") await prepareBenchConductor(base, run, { ownBuild: true });
    checkouts.push([`baseline ${spec}`, { cwd: base, run, nodeArgs: [...NODE_ARGS, ...flags] }]);
  }
  checkouts.push(["this checkout", { cwd: undefined, run: BENCH_CONDUCTOR_RUN, nodeArgs: NODE_ARGS }]);
  for (const [name, { cwd, run }] of checkouts) {
    await prepareBenchConductor(cwd, run);
    console.log(`${name} runs as: ${run}`);
  }
  /** Per baseline, its rounds paired with this checkout's. */
  const rounds = new Map<string, PairedRound<Measured>[]>(BASELINE_REVS.map((rev) => [rev, []]));
  try {
    for (let round = 0; round < ROUNDS; round++) {
      const load0 = loadNow();
      const results = new Map<string, Measured>();
      for (const [name, side] of roundOrder(checkouts, round)) {
        const dir = join(root, `${name.replace(/\W+/g, "-")}-${round}`);
        mkdirSync(dir);
        console.log(`\n== round ${round + 1}/${ROUNDS}: ${name} (${AUTH}), load ${loadNow().toFixed(2)} ==`);
        results.set(name, await measure(dir, side));
      }
      const load: [number, number] = [load0, loadNow()];
      for (const [rev, paired] of rounds)
        paired.push({ base: results.get(`baseline ${rev}`)!, here: results.get("this checkout")!, load });
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
    agent.destroy();
  }
  for (const [rev, paired] of rounds)
    compareRounds(FIGURES, paired, { title: `API, SQLite, ${NODES} nodes, ${AUTH}`, baseline: rev });
  printLoad("at end");
}

/** How one side of the comparison runs its conductor. */
interface Side {
  cwd: string | undefined;
  run: ConductorRun;
  nodeArgs: readonly string[];
}

async function measure(dir: string, side: Side): Promise<Measured> {
  const { child, url } = await startBenchConductor(dir, {
    args: authArgs(dir),
    ...side,
  });
  try {
    await issueToken(url);
    let failed = 0;
    let done = 0;
    let firstDone = 0;
    const createStart = performance.now();
    await closedLoop(NODES, CONCURRENCY, async (i) => {
      const res = await call(`${url}/v1/nodes`, "POST", {
        name: `bench-${i}`,
        driver: "fake-hardware",
        resource_class: i % 5 ? "small" : "large",
        properties: { cpus: 8, memory_mb: 16384, local_gb: 200, cpu_arch: "x86_64" },
        driver_info: { ipmi_address: `10.0.${i >> 8}.${i & 255}`, ipmi_password: "secret" },
      });
      if (res.status !== 201) failed++;
      if (++done === FIRST) firstDone = performance.now();
    });
    const createEnd = performance.now();
    const createRate = NODES / ((createEnd - createStart) / 1000);
    const firstRate = FIRST / ((firstDone - createStart) / 1000);
    const nextRate = NODES > FIRST ? (NODES - FIRST) / ((createEnd - firstDone) / 1000) : NaN;
    const list = await timed(SAMPLES, async () => {
      const res = await call(`${url}/v1/nodes?limit=1000`, "GET");
      if (res.status !== 200 || (JSON.parse(res.text) as { nodes: unknown[] }).nodes.length !== 1000)
        throw new Error("bad list");
    });
    const detail = await timed(SAMPLES, async () => {
      const res = await call(`${url}/v1/nodes/detail?limit=1000`, "GET");
      if (res.status !== 200) throw new Error("bad detail");
    });
    const detailNewest = await timed(SAMPLES, async () => {
      const res = await call(`${url}/v1/nodes/detail?limit=1000`, "GET latest");
      if (res.status !== 200 || (JSON.parse(res.text) as { nodes: unknown[] }).nodes.length !== 1000)
        throw new Error("bad detail (latest)");
    });
    const one = await timed(Math.max(SAMPLES, Number(process.env.BENCH_SHOW_SAMPLES ?? 200)), async () => {
      const res = await call(`${url}/v1/nodes/bench-${Math.floor(Math.random() * NODES)}`, "GET");
      if (res.status !== 200) throw new Error("bad show");
    });
    const rss = rssMiB(child.pid ?? 0);
    await new Promise((resolve) => setTimeout(resolve, IDLE_S * 1000));
    const rssIdle = rssMiB(child.pid ?? 0);
    const row = (...[name, ours, ironic, ratio]: [string, string, string, string]) =>
      console.log(`${name.padEnd(40)} ${ours.padStart(16)} ${ironic.padStart(16)} ${ratio.padStart(10)}`);
    console.log(
      `Anvil conductor API at ${NODES} nodes (SQLite, fake-hardware), concurrency ${CONCURRENCY}, ${SAMPLES}+ samples`,
    );
    row("measurement", "Anvil", "Ironic 21.4", "ratio");
    row("POST /v1/nodes", `${createRate.toFixed(0)}/s`, "38-57/s", `${(createRate / 57).toFixed(1)}x`);
    row(
      `POST /v1/nodes first ${FIRST} / next`,
      `${firstRate.toFixed(0)} / ${nextRate.toFixed(0)}/s`,
      "63 / 58/s",
      `${(firstRate / 63).toFixed(1)}x / ${(nextRate / 58).toFixed(1)}x`,
    );
    row(
      "GET /v1/nodes?limit=1000 p50 / p99",
      `${list.p50.toFixed(1)} / ${list.p99.toFixed(1)} ms`,
      "471 ms (median)",
      `${(471 / list.p50).toFixed(0)}x`,
    );
    row(
      "GET /v1/nodes/detail?limit=1000 p50/p99",
      `${detail.p50.toFixed(1)} / ${detail.p99.toFixed(1)} ms`,
      "1110 ms (median)",
      `${(1110 / detail.p50).toFixed(0)}x`,
    );
    row(
      "GET /v1/nodes/detail latest p50/p99",
      `${detailNewest.p50.toFixed(1)} / ${detailNewest.p99.toFixed(1)} ms`,
      "1110 ms (median)",
      `${(1110 / detailNewest.p50).toFixed(0)}x`,
    );
    row("GET /v1/nodes/{id} p50 / p99", `${one.p50.toFixed(2)} / ${one.p99.toFixed(2)} ms`, "-", "-");
    row("GET /v1/nodes/{id} req/s (1 client)", `${one.rps.toFixed(0)}/s`, "-", "-");
    row("conductor RSS", `${rss.toFixed(0)} MiB`, "~490 MiB", `${(490 / rss).toFixed(1)}x`);
    row(`conductor RSS, ${IDLE_S} s idle`, `${rssIdle.toFixed(0)} MiB`, "-", "-");
    console.log(`failed creates: ${failed}`);
    const goals = [
      ["create >= 2,000/s", createRate >= 2000],
      ["list p99 < 20 ms", list.p99 < 20],
      ["detail p99 < 60 ms", detail.p99 < 60],
      ["single GET p99 < 5 ms", one.p99 < 5],
      ["RSS < 200 MB", rss < 200],
    ] as const;
    for (const [goal, met] of goals) console.log(`goal ${goal}: ${met ? "met" : "NOT met"}`);
    return { createRate, firstRate, nextRate, list, detail, detailNewest, one, rss, rssIdle };
  } finally {
    child.kill("SIGTERM");
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
