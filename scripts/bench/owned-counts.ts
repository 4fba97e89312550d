// `owned_nodes` of GET /v1/conductors at scale: one count of BENCH_NODES (default 100,000) nodes over a ring of
// three conductors, the old way (one read of every node's summary, then the ring) beside OwnedCounts (two
// columns a page, yielding between pages), in the same process on the same fleet. Prints wall time, CPU and
// the longest time the event loop was blocked (the gap a 1 ms timer sees), on SQLite and PostgreSQL
// (BENCH_STORES). Run it under `flock /tmp/anvil-heavy.lock`.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HashRing } from "../../conductor/cluster/hash-ring.ts";
import { OwnedCounts } from "../../conductor/cluster/owned-counts.ts";
import { openStore } from "../../conductor/db/open-store.ts";
import type { Store } from "../../conductor/db/store.ts";
import type { ConductorRecord } from "../../shared/resources.ts";
import { seedFleet } from "./fleet.ts";
import { throwawayPostgres } from "./throwaway-postgres.ts";

const NODES = Number(process.env.BENCH_NODES ?? 100_000);
const STORES = process.env.BENCH_STORES?.split(",") ?? ["sqlite", "postgresql"];
const ROUNDS = 3;

interface Measured {
  wallMs: number;
  cpuMs: number;
  blockedMs: number;
}

async function measure(count: () => Promise<unknown>): Promise<Measured> {
  let last = performance.now();
  let blockedMs = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    blockedMs = Math.max(blockedMs, now - last);
    last = now;
  }, 1);
  const cpu0 = process.cpuUsage();
  const started = performance.now();
  await count();
  const wallMs = performance.now() - started;
  const cpu = process.cpuUsage(cpu0);
  await new Promise((resolve) => setTimeout(resolve, 5)); // the timer's first tick after a block records it
  clearInterval(timer);
  return { wallMs, cpuMs: (cpu.user + cpu.system) / 1000, blockedMs };
}

async function run(label: string, store: Store): Promise<void> {
  const ring = new HashRing(["c1", "c2", "c3"]);
  const membership = {
    generation: 1,
    ownerOf: (node: { uuid: string }) => ({ hostname: ring.ownerOf(node.uuid) }) as ConductorRecord,
  };
  const before = async () => {
    const counts = new Map<string, number>();
    for (const node of await store.listNodeSummaries({}, {})) {
      const owner = ring.ownerOf(node.uuid) ?? "";
      counts.set(owner, (counts.get(owner) ?? 0) + 1);
    }
    return counts;
  };
  const after = () => new OwnedCounts({ store, membership, maxAgeMs: 0 }).get();
  const show = (m: Measured) =>
    `wall ${m.wallMs.toFixed(0)} ms, CPU ${m.cpuMs.toFixed(0)} ms, event loop blocked at most ${m.blockedMs.toFixed(0)} ms`;
  for (let round = 1; round <= ROUNDS; round++) {
    const old = await measure(before);
    const now = await measure(after);
    console.log(`${label}, round ${round}: before: ${show(old)}`);
    console.log(
      `${label}, round ${round}: after:  ${show(now)}  (longest block ×${(old.blockedMs / now.blockedMs).toFixed(1)} shorter)`,
    );
  }
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "anvil-owned-bench-"));
  const postgres = throwawayPostgres("anvil-owned-bench-pg-");
  try {
    for (const kind of STORES) {
      const database = kind === "postgresql" ? postgres.start() : join(dir, "fleet.sqlite");
      await seedFleet(database, NODES);
      const store = openStore(database);
      try {
        await run(`${kind}, ${NODES} nodes`, store);
      } finally {
        await store.close();
      }
    }
  } finally {
    postgres.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
