/**
 * ipmitool power status throughput against local ipmi_sim BMCs at concurrency 1, 8 and 32, the conductor's
 * CPU per call (its own plus its reaped children's), and what that means for one power sync pass.
 * Run: node --import tsx scripts/bench/power.ts [callsPerLevel]
 */
import { readFile } from "node:fs/promises";
import { cpus } from "node:os";
import { Ipmitool } from "../../conductor/drivers/ipmi/ipmitool.ts";
import { parseIpmiDriverInfo } from "../../conductor/drivers/ipmi/driver-info.ts";
import type { IpmiDriverInfo } from "../../conductor/drivers/ipmi/driver-info.ts";
import { startIpmiSim } from "../../test/helpers/ipmi-sim.ts";
import type { IpmiSim } from "../../test/helpers/ipmi-sim.ts";

const TICKS_PER_SECOND = 100; // USER_HZ on Linux

/** CPU seconds of a process and of its children that have been waited for. */
async function cpuSeconds(pid: number | "self" = "self"): Promise<{ self: number; children: number }> {
  const stat = await readFile(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // After the command name: field 3 is index 0, so utime=14 -> 11, stime -> 12, cutime -> 13, cstime -> 14.
  const tick = (index: number): number => Number(fields[index]) / TICKS_PER_SECOND;
  return { self: tick(11) + tick(12), children: tick(13) + tick(14) };
}

/** CPU seconds the BMC simulators (and their chassis_control scripts) used. */
async function simCpuSeconds(sims: IpmiSim[]): Promise<number> {
  let total = 0;
  for (const sim of sims) {
    const cpu = await cpuSeconds(sim.pid);
    total += cpu.self + cpu.children;
  }
  return total;
}

async function level(
  ipmitool: Ipmitool,
  sims: IpmiSim[],
  options: { concurrency: number; calls: number },
): Promise<{ rate: number; cpuPerCallMs: number; childCpuPerCallMs: number; simCpuPerCallMs: number }> {
  const bmcs = sims.map((sim) => parseIpmiDriverInfo(sim.driverInfo()));
  const simBefore = await simCpuSeconds(sims);
  const before = await cpuSeconds();
  const started = process.hrtime.bigint();
  let next = 0;
  const worker = async (slot: number): Promise<void> => {
    // Each worker talks to its own BMC, as a sync over many nodes would.
    const bmc = bmcs[slot % bmcs.length] as IpmiDriverInfo;
    while (next < options.calls) {
      next++;
      await ipmitool.run(bmc, ["chassis", "power", "status"]);
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, (_, slot) => worker(slot)));
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const after = await cpuSeconds();
  const simCpu = (await simCpuSeconds(sims)) - simBefore;
  const self = after.self - before.self;
  const children = after.children - before.children;
  return {
    rate: options.calls / seconds,
    cpuPerCallMs: ((self + children) / options.calls) * 1000,
    childCpuPerCallMs: (children / options.calls) * 1000,
    simCpuPerCallMs: (simCpu / options.calls) * 1000,
  };
}

function duration(seconds: number): string {
  if (seconds < 120) return `${seconds.toFixed(0)} s`;
  if (seconds < 7200) return `${(seconds / 60).toFixed(1)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

async function runLevels(
  ipmitool: Ipmitool,
  sims: IpmiSim[],
  options: { calls: number; label: string },
): Promise<{ concurrency: number; rate: number; cpuPerCallMs: number }[]> {
  const results = [];
  console.log(`\n${options.label}`);
  console.log(
    "concurrency | calls/s | conductor CPU ms/call (of which ipmitool) | BMC sim CPU ms/call | sync pass 10^4 | sync pass 10^5",
  );
  for (const concurrency of LEVELS) {
    const result = await level(ipmitool, sims, { concurrency, calls: options.calls });
    results.push({ concurrency, ...result });
    console.log(
      `${String(concurrency).padStart(11)} | ${result.rate.toFixed(1).padStart(7)} | ` +
        `${result.cpuPerCallMs.toFixed(1)} (${result.childCpuPerCallMs.toFixed(1)})`.padEnd(41) +
        ` | ${result.simCpuPerCallMs.toFixed(1).padStart(19)}` +
        ` | ${duration(1e4 / result.rate).padStart(14)} | ${duration(1e5 / result.rate).padStart(14)}`,
    );
  }
  return results;
}

const LEVELS = [1, 8, 32];

async function main(): Promise<void> {
  const calls = Number(process.argv[2] ?? 200);
  const sims: IpmiSim[] = [];
  try {
    for (let i = 0; i < 32; i++) sims.push(await startIpmiSim({ initialPower: "on" }));
    // No minimum interval: each worker has its own BMC, and we want ipmitool's own cost.
    const full = new Ipmitool({ minIntervalMs: 0, fullEnterpriseRegistry: true });
    const lean = new Ipmitool({ minIntervalMs: 0 });
    await level(full, sims, { concurrency: 4, calls: 20 }); // warm-up
    await level(lean, sims, { concurrency: 4, calls: 20 });
    console.log(
      `host: ${cpus().length} cores (${cpus()[0]?.model ?? "?"}); ${calls} calls per level; 32 ipmi_sim BMCs on loopback`,
    );
    const before = await runLevels(full, sims, {
      calls,
      label: "baseline: ipmitool loads the system's enterprise number registry (4.7 MB) on every run",
    });
    const after = await runLevels(lean, sims, {
      calls,
      label: "Anvil: ipmitool's HOME holds a one-entry registry",
    });
    const cpuOf = (rows: { cpuPerCallMs: number }[]) => Math.max(...rows.map((r) => r.cpuPerCallMs));
    const [cpuBefore, cpuAfter] = [cpuOf(before), cpuOf(after)];
    console.log(
      `\nconductor CPU per call: ${cpuBefore.toFixed(1)} -> ${cpuAfter.toFixed(1)} ms ` +
        `(x${(cpuBefore / cpuAfter).toFixed(2)} less)`,
    );
    for (const [label, cpuMs] of [
      ["baseline", cpuBefore],
      ["Anvil", cpuAfter],
    ] as const) {
      console.log(
        `CPU bound on one conductor, ${label} (${cpus().length} cores, ${cpuMs.toFixed(1)} ms/call): ` +
          `10^4 nodes ${duration((1e4 * cpuMs) / 1000 / cpus().length)}, 10^5 nodes ${duration((1e5 * cpuMs) / 1000 / cpus().length)}`,
      );
    }
    const single = after.find((r) => r.concurrency === 1);
    if (single) console.log(`ipmi_sim latency, one call at a time: ${(1000 / single.rate).toFixed(1)} ms`);
  } finally {
    for (const sim of sims) await sim.stop();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
