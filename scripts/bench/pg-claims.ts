// Allocation claims on PostgreSQL at the store level: createAllocation → claimNode → updateAllocation, 8 at a
// time, as the allocation service does, on one throwaway server. With BENCH_BASELINE_REV=<revision> the store
// of that revision (extracted with git archive) runs the same work on its own database of the same server, in
// alternating rounds, so the machine's other load hits both alike. Prints claims/s, p50/p99 and the CPU the
// bench process and the server spent per claim. BENCH_CLAIM=traits claims by class and the trait CUSTOM_FAST,
// which 1 node in 7 carries (as in the cluster bench's fleet); BENCH_CLAIM=traits-exact adds the exact spec
// every node has (16 GB, 8 CPUs); the default claims by class alone. Run it under `flock /tmp/anvil-heavy.lock`.
import { newAllocationRecord } from "../../conductor/allocations/service.ts";
import { throwawayPostgres } from "./throwaway-postgres.ts";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Store } from "../../conductor/db/store.ts";
import { fakeNode } from "./fleet.ts";
import { serverCpuMs } from "./proc-cpu.ts";

const NODES = Number(process.env.BENCH_NODES ?? 20_000);
const CLAIMS = Number(process.env.BENCH_CLAIMS ?? 1_000);
const ROUNDS = 4;
const CONCURRENCY = 8;
const BASELINE_REV = process.env.BENCH_BASELINE_REV;
const MODE = process.env.BENCH_CLAIM ?? "class";
if (!["class", "traits", "traits-exact"].includes(MODE))
  throw new Error("BENCH_CLAIM: class, traits or traits-exact");
const TRAITS = MODE === "class" ? [] : ["CUSTOM_FAST"];
const SPEC = MODE === "traits-exact" ? { memory_mb: 16384, vcpus: 8, match: "exact" as const } : null;

type OpenStore = (database: string) => Store;

async function seed(store: Store, count: number): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < count) {
        const i = next++;
        await store.createNode({
          ...fakeNode({ driver: "fake-hardware", name: `claim-${i}` }),
          provision_state: "available",
          power_state: "power off",
          resource_class: "small",
          traits: i % 7 === 0 ? ["CUSTOM_FAST"] : [],
          properties: { memory_mb: 16384, cpus: 8, local_gb: 500 },
        });
      }
    }),
  );
}

/** One round: `count` allocations as the service makes them; returns latencies (ms). */
async function claims(store: Store, count: number): Promise<number[]> {
  const times: number[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next++ < count) {
        const t = performance.now();
        const allocation = await store.createAllocation(
          newAllocationRecord({ resource_class: "small", traits: TRAITS, spec: SPEC ?? undefined }),
        );
        const node = await store.claimNode(allocation.uuid, {
          resourceClass: "small",
          traits: TRAITS,
          candidateNodes: [],
          spec: SPEC,
          project: null,
        });
        if (!node) throw new Error("no node left: raise BENCH_NODES");
        await store.updateAllocation(allocation.uuid, { state: "active", node_uuid: node.uuid });
        times.push(performance.now() - t);
      }
    }),
  );
  return times;
}

const pct = (sorted: number[], p: number) => sorted[Math.ceil((p / 100) * sorted.length) - 1] ?? NaN;

async function main(): Promise<void> {
  const postgres = throwawayPostgres("anvil-claims-pg-");
  const baseDir = mkdtempSync(join(tmpdir(), "anvil-claims-base-"));
  try {
    const url = postgres.start();
    const admin = (await import("pg")).default;
    const client = new admin.Client({ connectionString: url });
    await client.connect();
    await client.query("CREATE DATABASE baseline");
    await client.end();
    const sides: { name: string; store: Store }[] = [];
    const current = (await import("../../conductor/db/open-store.ts")).openStore as OpenStore;
    sides.push({ name: "this checkout", store: current(url) });
    if (BASELINE_REV) {
      execFileSync("bash", ["-c", `git archive ${BASELINE_REV} | tar -x -C ${baseDir}`]);
      symlinkSync(resolve("node_modules"), join(baseDir, "node_modules"));
      const mod = (await import(join(baseDir, "conductor/db/open-store.ts"))) as { openStore: OpenStore };
      sides.unshift({
        name: `baseline ${BASELINE_REV}`,
        store: mod.openStore(url.replace(/\/anvil$/, "/baseline")),
      });
    }
    for (const side of sides) await seed(side.store, NODES);
    const per = Math.floor(CLAIMS / ROUNDS);
    const results = new Map(
      sides.map((s) => [s.name, { times: [] as number[], wall: 0, cpu: 0, server: 0 }]),
    );
    for (const side of sides) await claims(side.store, 100); // warm-up
    for (let round = 0; round < ROUNDS; round++) {
      for (const side of round % 2 ? [...sides].reverse() : sides) {
        const r = results.get(side.name)!;
        const cpu0 = process.cpuUsage();
        const server0 = serverCpuMs(join(postgres.dir, "data")) / 1000;
        const t0 = performance.now();
        r.times.push(...(await claims(side.store, per)));
        r.wall += (performance.now() - t0) / 1000;
        const used = process.cpuUsage(cpu0);
        r.cpu += (used.user + used.system) / 1e6;
        r.server += serverCpuMs(join(postgres.dir, "data")) / 1000 - server0;
      }
    }
    console.log(
      `PostgreSQL allocation claims by class${TRAITS.length ? ` + ${TRAITS.join(",")} (1 node in 7)` : ""}` +
        `${SPEC ? " + an exact spec" : ""}, ` +
        `${NODES} free nodes per side, concurrency ${CONCURRENCY}, ${ROUNDS} alternating rounds of ${per} claims per side`,
    );
    for (const [name, r] of results) {
      const sorted = r.times.sort((a, b) => a - b);
      const n = sorted.length;
      console.log(
        `${name.padEnd(24)} ${(n / r.wall).toFixed(0)}/s  p50 ${pct(sorted, 50).toFixed(1)} ms  p99 ${pct(sorted, 99).toFixed(1)} ms  ` +
          `CPU per claim: bench ${((r.cpu / n) * 1000).toFixed(2)} ms, server ${((r.server / n) * 1000).toFixed(2)} ms`,
      );
    }
    const [base, mine] = [...results.values()];
    if (BASELINE_REV && base && mine) {
      const rate = (r: typeof base) => r.times.length / r.wall;
      const server = (r: typeof base) => r.server / r.times.length;
      console.log(
        `this checkout against the baseline: claims/s ×${(rate(mine) / rate(base)).toFixed(2)}, ` +
          `server CPU per claim ×${(server(mine) / server(base)).toFixed(2)}`,
      );
    }
    for (const side of sides) await side.store.close();
  } finally {
    postgres.stop();
    rmSync(baseDir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
