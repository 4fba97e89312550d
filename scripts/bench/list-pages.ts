// The short node list at scale: one conductor on a SQLite fleet of BENCH_NODES (default 100,000), 8 clients
// fetching and parsing `GET /v1/nodes?limit=1000` (the stock CLI's `node list` page), BENCH_PAGES pages a
// round. Prints p50/p99, pages/s and the conductor's CPU per page. With BENCH_BASELINE_REV=<revision> the
// conductor of that revision (extracted with git archive) serves a copy of the same fleet in alternating
// rounds, so the machine's other load hits both alike, and the ratio is printed. Run it under
// `flock /tmp/anvil-heavy.lock`.
import { execFileSync, spawn } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { seedFleet } from "./fleet.ts";

const NODES = Number(process.env.BENCH_NODES ?? 100_000);
const PAGES = Number(process.env.BENCH_PAGES ?? 400);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const BASELINE_REV = process.env.BENCH_BASELINE_REV;
const CONCURRENCY = 8;
const HEADERS = { "X-OpenStack-Ironic-API-Version": "1.78" };

/** CPU milliseconds (user + system) a process has used. */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

interface Round {
  p50: number;
  p99: number;
  perS: number;
  cpuPerPage: number;
}

async function round(checkout: string, fleet: string, dir: string): Promise<Round> {
  const database = join(dir, "round.sqlite");
  copyFileSync(fleet, database);
  const child = spawn(
    process.execPath,
    [
      ...["--import", "tsx", "conductor/main.ts", "--port", "0", "--db", database],
      ...["--data-dir", join(dir, "data"), "--power-sync-interval", "0", "--log-level", "info"],
    ],
    { cwd: checkout, stdio: ["ignore", "ignore", "pipe"] },
  );
  try {
    const url = await new Promise<string>((ok, fail) => {
      createInterface({ input: child.stderr! }).on("line", (line) => {
        const match = /"url":"(http:\/\/[^"]+)"/.exec(line);
        if (match?.[1]) ok(match[1]);
      });
      child.on("exit", (code) => fail(new Error(`conductor exited ${code}`)));
    });
    const page = async (): Promise<void> => {
      const response = await fetch(`${url}/v1/nodes?limit=1000`, { headers: HEADERS });
      const body = JSON.parse(await response.text()) as { nodes?: unknown[]; next?: string };
      if (response.status !== 200 || body.nodes?.length !== 1000 || !body.next) throw new Error("bad page");
    };
    // untimed: a process's first pages compile its code paths and statements
    for (let i = 0; i < 20; i++) await page();
    const times: number[] = [];
    let next = 0;
    const cpu0 = cpuMs(child.pid!);
    const started = performance.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < PAGES) {
          next++;
          const t = performance.now();
          await page();
          times.push(performance.now() - t);
        }
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    times.sort((a, b) => a - b);
    return {
      p50: times[Math.floor(PAGES * 0.5)]!,
      p99: times[Math.ceil(PAGES * 0.99) - 1]!,
      perS: PAGES / seconds,
      cpuPerPage: (cpuMs(child.pid!) - cpu0) / PAGES,
    };
  } finally {
    child.kill("SIGINT");
    await new Promise((done) => child.once("exit", done));
  }
}

const show = (r: Round) =>
  `p50 ${r.p50.toFixed(1)} ms, p99 ${r.p99.toFixed(1)} ms, ${r.perS.toFixed(0)} pages/s, conductor CPU ${r.cpuPerPage.toFixed(2)} ms/page`;

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "anvil-list-bench-"));
  try {
    const fleet = join(dir, "fleet.sqlite");
    console.log(`seeding ${NODES} nodes: ${(await seedFleet(fleet, NODES)).toFixed(0)}/s`);
    const checkouts: [string, string][] = [["this checkout", resolve(".")]];
    if (BASELINE_REV) {
      const base = join(dir, "baseline");
      execFileSync("bash", ["-c", `mkdir -p ${base} && git archive ${BASELINE_REV} | tar -x -C ${base}`]);
      symlinkSync(resolve("node_modules"), join(base, "node_modules"));
      checkouts.unshift([`baseline ${BASELINE_REV}`, base]);
    }
    const results = new Map<string, Round[]>(checkouts.map(([name]) => [name, []]));
    for (let i = 0; i < ROUNDS; i++) {
      for (const [name, checkout] of checkouts) {
        const r = await round(checkout, fleet, dir);
        results.get(name)!.push(r);
        console.log(`round ${i + 1}, ${name}: ${show(r)}`);
      }
    }
    // the median round of each (by p99), so one disturbed round does not decide
    const median = (rounds: Round[]) =>
      [...rounds].sort((a, b) => a.p99 - b.p99)[Math.floor(rounds.length / 2)]!;
    console.log(`\n${NODES} nodes, ${CONCURRENCY} clients, 1,000 nodes a page; goal p99 < 50 ms`);
    for (const [name, rounds] of results) console.log(`${name} (median round): ${show(median(rounds))}`);
    if (BASELINE_REV) {
      const [before, after] = [...results.values()].map(median) as [Round, Round];
      console.log(
        `ratio: p99 ×${(before.p99 / after.p99).toFixed(2)} lower, CPU per page ×${(before.cpuPerPage / after.cpuPerPage).toFixed(2)} lower`,
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
