// One power-sync pass over a large fleet against simulated BMCs whose latency is measured, in the same run, on a
// real ipmi_sim through real ipmitool: 10^4 nodes (BENCH_SYNC_NODES) on one conductor (SQLite), and 10^5
// (BENCH_NODES) split by the hash ring across three conductors sharing PostgreSQL, each syncing only what it
// owns; and 10^4 nodes (BENCH_REDFISH_NODES, 0 to skip) with the redfish driver, each its own simulated Redfish
// BMC answering after the same latency, through the real driver (pools, sessions, zod). The pass's concurrency is the conductor's `power_sync.concurrency` (Ironic: sync_power_state_workers);
// BENCH_SYNC_CONCURRENCY lists the values tried, "auto" being the conductor's defaults (8 workers, added up to
// 32 while the pass's pace says it would not end within 80 % of the 60 s interval). The three conductors run in this one process (one event loop
// for all three: a pessimistic stand-in for three machines). Run under `flock /tmp/anvil-heavy.lock`.
import { throwawayPostgres } from "./throwaway-postgres.ts";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { POWER_SYNC_FIT, runPowerSyncPass } from "../../conductor/cluster/power-sync.ts";
import { storePowerSyncPort } from "../../conductor/cluster/power-sync-port.ts";
import { HashRing } from "../../conductor/cluster/hash-ring.ts";
import { defaultConfig } from "../../conductor/config.ts";
import { openStore } from "../../conductor/db/open-store.ts";
import { parseIpmiDriverInfo } from "../../conductor/drivers/ipmi/driver-info.ts";
import { Ipmitool } from "../../conductor/drivers/ipmi/ipmitool.ts";
import { defaultDrivers } from "../../conductor/drivers/registry.ts";
import { standaloneOperations } from "../../conductor/operations/standalone.ts";
import { startIpmiSim } from "../../test/helpers/ipmi-sim.ts";
import { seedFleet } from "./fleet.ts";
import { redfishPowerSync } from "./power-sync-redfish.ts";
import { estimateFleetSeconds, ipmitoolSample } from "./power-sync-ipmitool.ts";

const SINGLE_NODES = Number(process.env.BENCH_SYNC_NODES ?? 10_000);
const CLUSTER_NODES = Number(process.env.BENCH_NODES ?? 100_000);
const CONCURRENCY = (process.env.BENCH_SYNC_CONCURRENCY ?? "8,32,auto").split(",");
const STORES = process.env.BENCH_STORES?.split(",") ?? ["postgresql", "sqlite"];
const REDFISH_NODES = Number(process.env.BENCH_REDFISH_NODES ?? SINGLE_NODES);
// real ipmitool against one ipmi_sim per node: a sample (10^4 ipmi_sim processes do not fit the machine)
const IPMITOOL_SAMPLE = Number(process.env.BENCH_IPMITOOL_SAMPLE ?? 64);
const GOAL_S = 60;

/** Median wall time of one `chassis power status` to a local ipmi_sim, and the conductor's CPU per call. */
async function ipmiSimLatency(calls = 40): Promise<{ medianMs: number; cpuMs: number }> {
  const sim = await startIpmiSim({ initialPower: "on" });
  try {
    const ipmitool = new Ipmitool({ minIntervalMs: 0 });
    const info = parseIpmiDriverInfo(sim.driverInfo());
    await ipmitool.run(info, ["chassis", "power", "status"]); // warm-up
    const times: number[] = [];
    const cpuBefore = process.cpuUsage();
    const childBefore = childCpuMs();
    for (let i = 0; i < calls; i++) {
      const t = performance.now();
      await ipmitool.run(info, ["chassis", "power", "status"]);
      times.push(performance.now() - t);
    }
    const own = process.cpuUsage(cpuBefore);
    const cpuMs = (own.user + own.system) / 1000 + (childCpuMs() - childBefore);
    times.sort((a, b) => a - b);
    return { medianMs: times[Math.floor(times.length / 2)] ?? NaN, cpuMs: cpuMs / calls };
  } finally {
    await sim.stop();
  }
}

/** CPU of reaped children (ipmitool runs), in ms. */
function childCpuMs(): number {
  const fields = readFileSync(`/proc/${process.pid}/stat`, "utf8");
  const rest = fields.slice(fields.lastIndexOf(")") + 2).split(" ");
  return ((Number(rest[13]) + Number(rest[14])) / 100) * 1000;
}

interface PassResult {
  seconds: number;
  /** the most workers each conductor's pass ran with */
  workers: number[];
  shares: number[];
  checked: number;
  inSync: number;
}

/** One pass per conductor, all at once; each conductor owns what the ring over all of them gives it. */
async function syncPass(
  database: string,
  options: { conductors: number; concurrency: string; latencyMs: number },
): Promise<PassResult> {
  const defaults = defaultConfig().powerSync;
  const workers =
    options.concurrency === "auto"
      ? {
          concurrency: defaults.concurrency,
          maxConcurrency: defaults.maxConcurrency,
          fitWithinMs: defaults.intervalS * 1000 * POWER_SYNC_FIT,
        }
      : { concurrency: Number(options.concurrency) };
  const names = Array.from({ length: options.conductors }, (_, i) => `sync-${i}`);
  const ring = new HashRing(names);
  // the simulated BMC: fake-hardware power answering after ipmi_sim's measured latency
  const drivers = defaultDrivers(defaultConfig({ fakeDelayMs: Math.round(options.latencyMs) }));
  const stores = names.map(() => openStore(database));
  try {
    const started = performance.now();
    const reports = await Promise.all(
      names.map((name, i) =>
        runPowerSyncPass(
          storePowerSyncPort(
            standaloneOperations({ store: stores[i]!, drivers, holder: name, config: defaultConfig() }),
            (node) => ring.ownerOf(node.uuid) === name,
          ),
          { ...workers, forcePowerStateDuringSync: true, maxFailures: 3 },
        ),
      ),
    );
    return {
      seconds: (performance.now() - started) / 1000,
      shares: reports.map((r) => r.checked),
      workers: reports.map((r) => r.workers),
      checked: reports.reduce((sum, r) => sum + r.checked, 0),
      inSync: reports.reduce((sum, r) => sum + r.outcomes["in sync"], 0),
    };
  } finally {
    for (const store of stores) await store.close();
  }
}

function report(label: string, nodes: number, rows: { concurrency: string; pass: PassResult }[]): void {
  console.log(`\n${label}: ${nodes} nodes`);
  console.log("concurrency per conductor (reached) | pass | nodes/s | each conductor's share | all in sync");
  for (const { concurrency, pass } of rows) {
    console.log(
      `${`${concurrency} (${pass.workers.join("/")})`.padStart(35)} | ${pass.seconds.toFixed(1).padStart(5)} s | ` +
        `${(pass.checked / pass.seconds).toFixed(0).padStart(7)} | ${pass.shares.join(" / ").padEnd(22)} | ` +
        `${pass.inSync === nodes ? "yes" : `no (${pass.inSync} of ${nodes})`}` +
        `${pass.seconds <= GOAL_S ? "" : `   over the ${GOAL_S} s goal`}`,
    );
  }
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "anvil-sync-bench-"));
  const postgres = throwawayPostgres("anvil-sync-bench-pg-");
  try {
    const latency = await ipmiSimLatency();
    console.log(
      `ipmi_sim through ipmitool, one call at a time: median ${latency.medianMs.toFixed(1)} ms wall, ` +
        `${latency.cpuMs.toFixed(1)} ms conductor CPU (with ipmitool) per call; the simulated BMC answers after ` +
        `${Math.round(latency.medianMs)} ms`,
    );
    const latencyMs = latency.medianMs;
    if (STORES.includes("sqlite")) {
      const database = join(dir, "sync.sqlite");
      const seeded = await seedFleet(database, SINGLE_NODES);
      console.log(`seeded ${SINGLE_NODES} nodes on SQLite at ${seeded.toFixed(0)}/s`);
      const rows = [];
      for (const concurrency of CONCURRENCY)
        rows.push({ concurrency, pass: await syncPass(database, { conductors: 1, concurrency, latencyMs }) });
      report("one conductor, SQLite", SINGLE_NODES, rows);
    }
    if (REDFISH_NODES > 0) {
      const rf = await redfishPowerSync(join(dir, "redfish.sqlite"), { count: REDFISH_NODES, latencyMs });
      console.log(
        `\nredfish, one conductor, SQLite: ${REDFISH_NODES} nodes, one simulated BMC each (auto workers)`,
      );
      for (const [label, pass] of [
        ["first pass (sessions made)", rf.cold],
        ["second pass (sessions kept)", rf.warm],
      ] as const) {
        console.log(
          `${label.padStart(28)} | ${pass.seconds.toFixed(1).padStart(5)} s | ` +
            `${(pass.checked / pass.seconds).toFixed(0).padStart(6)} nodes/s | ${pass.workers} workers | ` +
            `${pass.inSync === REDFISH_NODES ? "all in sync" : `${pass.inSync} of ${REDFISH_NODES} in sync`}`,
        );
      }
      console.log(
        `per call, one at a time on a kept connection: redfish ${rf.medianMs.toFixed(1)} ms wall, ` +
          `${rf.cpuMsPerCall.toFixed(2)} ms conductor CPU; ipmitool ${latency.medianMs.toFixed(1)} ms wall, ` +
          `${latency.cpuMs.toFixed(1)} ms CPU (with the ipmitool process)`,
      );
      console.log(
        `conductor CPU per node during the passes: redfish ${rf.cold.cpuMsPerCall.toFixed(2)} ms (first), ` +
          `${rf.warm.cpuMsPerCall.toFixed(2)} ms (second)`,
      );
      if (IPMITOOL_SAMPLE > 0) {
        const sample = await ipmitoolSample(join(dir, "ipmi.sqlite"), IPMITOOL_SAMPLE);
        const estimate = estimateFleetSeconds({
          nodes: REDFISH_NODES,
          wallMsPerCall: latency.medianMs,
          cpuMsPerCall: sample.cpuMsPerCall,
          workers: defaultConfig().powerSync.maxConcurrency,
          cores: 2,
        });
        console.log(
          `ipmitool, same run, a sample of ${sample.nodes} nodes each on its own ipmi_sim (auto workers): ` +
            `${sample.seconds.toFixed(1)} s, ${sample.workers} workers, ` +
            `${sample.inSync === sample.nodes ? "all in sync" : `${sample.inSync} of ${sample.nodes} in sync`}; ` +
            `conductor CPU per node ${sample.cpuMsPerCall.toFixed(1)} ms (ipmitool processes included), ` +
            `ipmi_sim CPU per node ${sample.bmcCpuMsPerCall.toFixed(1)} ms`,
        );
        console.log(
          `ipmitool at ${REDFISH_NODES} nodes, estimated (not measured): max(N x ${latency.medianMs.toFixed(1)} ms / ` +
            `${defaultConfig().powerSync.maxConcurrency} workers, N x ${sample.cpuMsPerCall.toFixed(1)} ms CPU / 2 cores) = ` +
            `${estimate.toFixed(0)} s; redfish measured ${rf.warm.seconds.toFixed(1)} s`,
        );
      }
    }
    if (STORES.includes("postgresql")) {
      const url = postgres.start();
      const seeded = await seedFleet(url, CLUSTER_NODES);
      console.log(`seeded ${CLUSTER_NODES} nodes on PostgreSQL at ${seeded.toFixed(0)}/s`);
      const rows = [];
      for (const concurrency of CONCURRENCY)
        rows.push({ concurrency, pass: await syncPass(url, { conductors: 3, concurrency, latencyMs }) });
      report("three conductors, PostgreSQL, ring split", CLUSTER_NODES, rows);
    }
    console.log(
      `\nWith real ipmitool the conductor's CPU bounds a pass too: ${latency.cpuMs.toFixed(1)} ms per call is ` +
        `${(((CLUSTER_NODES / 3) * latency.cpuMs) / 1000 / 2).toFixed(0)} s of a 2-core machine per conductor ` +
        `for a third of ${CLUSTER_NODES} nodes.`,
    );
  } finally {
    postgres.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
