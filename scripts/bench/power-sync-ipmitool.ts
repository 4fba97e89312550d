// The power sync through real ipmitool on a sample: `count` ipmi nodes, each its own ipmi_sim (a real fleet
// has one BMC per node, and ipmitool runs one command at a time per BMC), one pass with the conductor's
// auto workers. 10^4 ipmi_sims would not fit this machine, so the sample's per-call figures are what the
// 10^4 estimate is made of (method in `estimateFleetSeconds`).
import { POWER_SYNC_FIT, runPowerSyncPass } from "../../conductor/cluster/power-sync.ts";
import { storePowerSyncPort } from "../../conductor/cluster/power-sync-port.ts";
import { defaultConfig } from "../../conductor/config.ts";
import { openStore } from "../../conductor/db/open-store.ts";
import { driverRegistry } from "../../conductor/drivers/hardware-type.ts";
import { ipmiHardware } from "../../conductor/drivers/registry.ts";
import { newNode } from "../../conductor/operations/node-record.ts";
import { standaloneOperations } from "../../conductor/operations/standalone.ts";
import { startIpmiSim, type IpmiSim } from "../../test/helpers/ipmi-sim.ts";
import { processCpu } from "./proc-cpu.ts";

export interface IpmitoolSampleResult {
  nodes: number;
  seconds: number;
  inSync: number;
  workers: number;
  /** Conductor CPU per power read during the pass, ipmitool processes included (reaped children). */
  cpuMsPerCall: number;
  /** ipmi_sim CPU per call (the simulated BMCs' side, not the conductor's). */
  bmcCpuMsPerCall: number;
}

/**
 * A pass over N nodes takes at least the latency-bound time (N calls at the median wall time, `workers` at
 * once) and at least the CPU-bound time (N calls at the measured CPU each, on `cores` cores); the estimate is
 * the larger of the two. Returns seconds.
 */
export function estimateFleetSeconds(options: {
  nodes: number;
  wallMsPerCall: number;
  cpuMsPerCall: number;
  workers: number;
  cores: number;
}): number {
  const latencyBound = (options.nodes * options.wallMsPerCall) / options.workers / 1000;
  const cpuBound = (options.nodes * options.cpuMsPerCall) / options.cores / 1000;
  return Math.max(latencyBound, cpuBound);
}

/** Seeds `count` ipmi nodes on their own ipmi_sims (powered off) and runs one power sync pass. */
export async function ipmitoolSample(database: string, count: number): Promise<IpmitoolSampleResult> {
  const sims: IpmiSim[] = [];
  const config = defaultConfig();
  const hw = ipmiHardware(config);
  const store = openStore(database);
  try {
    for (let i = 0; i < count; i++) sims.push(await startIpmiSim({ initialPower: "off" }));
    for (const [i, sim] of sims.entries()) {
      const node = newNode({ driver: "ipmi", name: `ipmi-${i}`, driver_info: sim.driverInfo() }, hw);
      await store.createNode({ ...node, provision_state: "available", power_state: "power off" });
    }
    const defaults = config.powerSync;
    const bmcBefore = sims.reduce((sum, sim) => sum + processCpu(sim.pid).own, 0);
    const own = process.cpuUsage();
    const children = processCpu(process.pid).children;
    const started = performance.now();
    const report = await runPowerSyncPass(
      storePowerSyncPort(
        standaloneOperations({ store, drivers: driverRegistry([hw]), holder: "sync-ipmi", config }),
      ),
      {
        concurrency: defaults.concurrency,
        maxConcurrency: defaults.maxConcurrency,
        fitWithinMs: defaults.intervalS * 1000 * POWER_SYNC_FIT,
        forcePowerStateDuringSync: true,
        maxFailures: 3,
      },
    );
    const seconds = (performance.now() - started) / 1000;
    const used = process.cpuUsage(own);
    const cpuMs = (used.user + used.system) / 1000 + (processCpu(process.pid).children - children);
    const bmcMs = sims.reduce((sum, sim) => sum + processCpu(sim.pid).own, 0) - bmcBefore;
    return {
      nodes: count,
      seconds,
      inSync: report.outcomes["in sync"],
      workers: report.workers,
      cpuMsPerCall: cpuMs / report.checked,
      bmcCpuMsPerCall: bmcMs / report.checked,
    };
  } finally {
    await hw.stop?.();
    await store.close();
    await Promise.all(sims.map((sim) => sim.stop()));
  }
}
