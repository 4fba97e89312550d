/**
 * Power status at scale (issue 28): ipmitool per call (the baseline, same run), FreeIPMI's ipmipower (many
 * hosts per process) and the native RMCP+ client, first against real ipmi_sim BMCs (calls/s, conductor CPU per
 * status), then a full sweep of 10^4 and 10^5 stand-in BMCs (wall time, conductor CPU-seconds, the fleet's
 * CPU apart: other processes, read from /proc/<pid>/stat).
 * Run: node --import tsx scripts/bench/power-status.ts [--calls 320] [--sizes 10000,100000]
 *   [--workers 32] [--ipmipower-sizes 10000] [--ipmipower-fanout 256]
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { cpus } from "node:os";
import { parseArgs } from "node:util";
import { runPowerSyncPass } from "../../conductor/cluster/power-sync.ts";
import type { PowerSyncPort, SyncNode } from "../../conductor/cluster/power-sync.ts";
import type { DriverNode } from "../../conductor/drivers/interfaces.ts";
import { parseIpmiDriverInfo } from "../../conductor/drivers/ipmi/driver-info.ts";
import { Ipmitool } from "../../conductor/drivers/ipmi/ipmitool.ts";
import { RmcpClient } from "../../conductor/drivers/ipmi/rmcp/client.ts";
import { IpmitoolPower } from "../../conductor/drivers/power/ipmitool.ts";
import type { PowerState } from "../../shared/states.ts";
import { startIpmiSim } from "../../test/helpers/ipmi-sim.ts";
import type { IpmiSim } from "../../test/helpers/ipmi-sim.ts";
import { fleetAddress } from "../../test/helpers/rmcp-fleet.ts";
import { ipmipowerStat } from "./ipmipower.ts";
import type { IpmipowerAnswer } from "./ipmipower.ts";
import { fleetPowerOf } from "./rmcp-fleet.ts";
import { processCpu } from "./proc-cpu.ts";

const USER = "admin";
const FLEET_PASSWORD = "stand-in-pw";
/** BMCs per stand-in process: each is a socket, and a process may hold 20,000 descriptors here. */
const BMCS_PER_PROCESS = 15_000;
/** Hosts per ipmipower process (it holds a socket per host from the start). */
const IPMIPOWER_BATCH = 5_000;

/** Conductor-side CPU (this process and the programs it ran) across `fn`, with its wall time. */
async function measured<T>(fn: () => Promise<T>): Promise<{ value: T; wallS: number; cpuS: number }> {
  const before = processCpu("self");
  const own = process.cpuUsage();
  const began = performance.now();
  const value = await fn();
  const wallS = (performance.now() - began) / 1000;
  const used = process.cpuUsage(own);
  const children = processCpu("self").children - before.children;
  return { value, wallS, cpuS: (used.user + used.system) / 1e6 + children / 1000 };
}

async function pool(count: number, workers: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(workers, count) }, async () => {
      while (next < count) await fn(next++);
    }),
  );
}

interface Row {
  method: string;
  statuses: number;
  wallS: number;
  cpuS: number;
  bmcCpuS: number;
  wrong: number;
}

function printRows(title: string, rows: Row[]): void {
  console.log(`\n${title}`);
  console.log(
    "method | statuses | wall s | statuses/s | conductor CPU ms/status | conductor CPU s | BMC-side CPU s | wrong answers",
  );
  console.log("---|---|---|---|---|---|---|---");
  for (const r of rows) {
    console.log(
      `${r.method} | ${r.statuses} | ${r.wallS.toFixed(2)} | ${(r.statuses / r.wallS).toFixed(0)} | ` +
        `${((r.cpuS * 1000) / r.statuses).toFixed(3)} | ${r.cpuS.toFixed(2)} | ${r.bmcCpuS.toFixed(2)} | ${r.wrong}`,
    );
  }
}

/** Real ipmi_sim BMCs: the same statuses through each reader, ipmitool first. */
async function onIpmiSim(options: { bmcs: number; calls: number }): Promise<Row[]> {
  const sims: IpmiSim[] = [];
  try {
    for (let i = 0; i < options.bmcs; i++)
      sims.push(await startIpmiSim({ initialPower: i % 3 === 0 ? "off" : "on" }));
    const expectOn = sims.map((_, i) => i % 3 !== 0);
    const simCpu = (): number => sims.reduce((sum, sim) => sum + processCpu(sim.pid).own, 0) / 1000;
    const rows: Row[] = [];
    const run = async (method: string, fn: () => Promise<number>): Promise<void> => {
      const bmcBefore = simCpu();
      const { value: wrong, wallS, cpuS } = await measured(fn);
      rows.push({ method, statuses: options.calls, wallS, cpuS, bmcCpuS: simCpu() - bmcBefore, wrong });
    };
    const ipmitool = new Ipmitool({ minIntervalMs: 0 });
    const infos = sims.map((sim) => parseIpmiDriverInfo(sim.driverInfo()));
    const viaIpmitool = async (): Promise<number> => {
      let wrong = 0;
      await pool(options.calls, sims.length, async (i) => {
        const out = await ipmitool.run(infos[i % sims.length]!, ["chassis", "power", "status"]);
        if (out.includes("is on") !== expectOn[i % sims.length]) wrong++;
      });
      return wrong;
    };
    const client = new RmcpClient();
    const targets = sims.map((sim) => ({
      host: sim.host,
      port: sim.port,
      username: sim.username,
      password: sim.password,
      privilege: "ADMINISTRATOR" as const,
    }));
    const viaNative = async (): Promise<number> => {
      let wrong = 0;
      await pool(options.calls, sims.length, async (i) => {
        if ((await client.powerIsOn(targets[i % sims.length]!)) !== expectOn[i % sims.length]) wrong++;
      });
      return wrong;
    };
    const hosts = sims.map((sim) => `${sim.host}:${sim.port}`);
    const viaIpmipower = async (): Promise<number> => {
      let wrong = 0;
      for (let done = 0; done < options.calls; done += sims.length) {
        const { answers } = await ipmipowerStat(hosts, {
          username: sims[0]!.username,
          password: sims[0]!.password,
        });
        // NOTE: ipmipower prints no port, and every ipmi_sim is on 127.0.0.1: checked by count
        const on = answers.filter((a) => a.state === "on").length;
        wrong += Math.abs(on - expectOn.filter(Boolean).length) + (sims.length - answers.length);
        wrong += answers.filter((a) => a.state === "error").length;
      }
      return wrong;
    };
    // warm-up for each reader: page cache, JIT, ipmi_sim's first sessions
    for (const warmUp of [viaIpmitool, viaIpmipower, viaNative]) await warmUp();
    await run("ipmitool (one process per status; baseline)", viaIpmitool);
    await run("ipmipower (one process per 32 BMCs)", viaIpmipower);
    await run("native RMCP+ (one socket)", viaNative);
    await client.close();
    return rows;
  } finally {
    await Promise.all(sims.map((sim) => sim.stop()));
  }
}

/** Starts the stand-in fleet for `size` BMCs in processes of BMCS_PER_PROCESS; resolves once all listen. */
async function startFleet(size: number, port: number): Promise<ChildProcess[]> {
  const children: ChildProcess[] = [];
  for (let first = 0; first < size; first += BMCS_PER_PROCESS) {
    const count = Math.min(BMCS_PER_PROCESS, size - first);
    const child = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        new URL("./rmcp-fleet.ts", import.meta.url).pathname,
        String(first),
        String(count),
        String(port),
      ],
      { stdio: ["pipe", "pipe", "inherit"], env: { ...process.env, FLEET_USERNAME: USER, FLEET_PASSWORD } },
    );
    children.push(child);
  }
  await Promise.all(
    children.map(
      (child) =>
        new Promise<void>((resolve, reject) => {
          child.stdout?.once("data", () => resolve());
          child.once("exit", (code) => reject(new Error(`stand-in fleet process exited (${code})`)));
        }),
    ),
  );
  return children;
}

/** The sync's view over an in-memory record of `size` ipmi nodes, reading through the ipmi power interface. */
function memoryPort(
  size: number,
  port: number,
  power: IpmitoolPower,
): PowerSyncPort & { wrong: () => number } {
  const nodes: DriverNode[] = Array.from({ length: size }, (_, i) => ({
    uuid: `n-${i}`,
    name: null,
    driver_info: {
      ipmi_address: fleetAddress(i),
      ipmi_port: port,
      ipmi_username: USER,
      ipmi_password: FLEET_PASSWORD,
    },
    properties: {},
    instance_info: {},
    driver_internal_info: {},
    ports: [],
  }));
  const recorded: PowerState[] = nodes.map((_, i) => (fleetPowerOf(i) ? "power on" : "power off"));
  let wrong = 0;
  const indexOf = (uuid: string): number => Number(uuid.slice(2));
  return {
    listNodes: async (): Promise<SyncNode[]> =>
      nodes.map((n, i) => ({ uuid: n.uuid, powerState: recorded[i]!, syncFailures: 0 })),
    getPower: (node, options) => power.getPowerState(nodes[indexOf(node.uuid)]!, options),
    setPower: async () => {
      wrong++;
    },
    recordPowerState: async () => {
      wrong++;
    },
    recordFailure: async () => undefined,
    setMaintenance: async () => undefined,
    wrong: () => wrong,
  };
}

async function sweep(
  size: number,
  options: { port: number; workers: number; ipmipowerFanout: number | undefined },
): Promise<Row[]> {
  const fleet = await startFleet(size, options.port);
  const fleetCpu = (): number => fleet.reduce((sum, child) => sum + processCpu(child.pid ?? 0).own, 0) / 1000;
  const rows: Row[] = [];
  try {
    const client = new RmcpClient();
    const power = new IpmitoolPower({ statusClient: client });
    const syncPort = memoryPort(size, options.port, power);
    const fleetBefore = fleetCpu();
    const {
      value: report,
      wallS,
      cpuS,
    } = await measured(() =>
      runPowerSyncPass(syncPort, {
        concurrency: options.workers,
        forcePowerStateDuringSync: true,
        maxFailures: 3,
      }),
    );
    rows.push({
      method: `native RMCP+, power sync pass, ${options.workers} workers`,
      statuses: report.checked,
      wallS,
      cpuS,
      bmcCpuS: fleetCpu() - fleetBefore,
      wrong: syncPort.wrong() + (report.checked - report.outcomes["in sync"]),
    });
    await client.close();
    const fanout = options.ipmipowerFanout;
    if (fanout !== undefined) {
      // hostranges keep argv short: 127.100.0.[1-255],127.100.1.[0-255],... (the fleet is on one port).
      // NOTE: ipmipower opens every host's socket up front: 10^4 hosts in one process fail here
      // ("ipmi_get_random: Bad file descriptor", 20,000 descriptors), so it runs in batches, one after another
      const before = fleetCpu();
      const {
        value,
        wallS: w,
        cpuS: c,
      } = await measured(async () => {
        const answers: IpmipowerAnswer[] = [];
        for (let first = 0; first < size; first += IPMIPOWER_BATCH) {
          const count = Math.min(IPMIPOWER_BATCH, size - first);
          const hosts = hostRanges(first, count).map((h) => `${h}:${options.port}`);
          const batch = await ipmipowerStat(hosts, { username: USER, password: FLEET_PASSWORD, fanout });
          answers.push(...batch.answers);
        }
        return { answers };
      });
      const on = value.answers.filter((a) => a.state === "on").length;
      const expected = Array.from({ length: size }, (_, i) => fleetPowerOf(i)).filter(Boolean).length;
      rows.push({
        method: `ipmipower, processes of ${IPMIPOWER_BATCH} hosts in turn, fanout ${fanout}`,
        statuses: size,
        wallS: w,
        cpuS: c,
        bmcCpuS: fleetCpu() - before,
        wrong:
          Math.abs(on - expected) +
          (size - value.answers.length) +
          value.answers.filter((a) => a.state === "error").length,
      });
    }
  } finally {
    for (const child of fleet) child.stdin?.end();
    await Promise.all(fleet.map((child) => new Promise((resolve) => child.once("exit", resolve))));
  }
  return rows;
}

/** "a.b.c.[x-y]" ranges covering fleet BMCs first..first+count-1. */
export function hostRanges(first: number, count: number): string[] {
  const out: string[] = [];
  for (let i = first; i < first + count;) {
    const [a, b, c, d] = fleetAddress(i).split(".").map(Number) as [number, number, number, number];
    const last = Math.min(255, d + (first + count - i) - 1);
    out.push(last === d ? `${a}.${b}.${c}.${d}` : `${a}.${b}.${c}.[${d}-${last}]`);
    i += last - d + 1;
  }
  return out;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      calls: { type: "string", default: "320" },
      sizes: { type: "string", default: "10000,100000" },
      workers: { type: "string", default: "32" },
      port: { type: "string", default: "623" },
      // ipmipower at scale: the sizes it sweeps too, and its fanout (its default is 64)
      "ipmipower-sizes": { type: "string", default: "10000" },
      "ipmipower-fanout": { type: "string", default: "256" },
      "skip-sim": { type: "boolean", default: false },
    },
  });
  console.log(`host: ${cpus().length} cores (${cpus()[0]?.model ?? "?"})`);
  if (!values["skip-sim"]) {
    const calls = Number(values.calls);
    printRows(
      `32 real ipmi_sim BMCs on loopback, ${calls} statuses per reader, 32 at a time`,
      await onIpmiSim({ bmcs: 32, calls }),
    );
  }
  for (const size of values.sizes
    .split(",")
    .map(Number)
    .filter((n) => n > 0)) {
    const rows = await sweep(size, {
      port: Number(values.port),
      workers: Number(values.workers),
      ipmipowerFanout: values["ipmipower-sizes"].split(",").map(Number).includes(size)
        ? Number(values["ipmipower-fanout"])
        : undefined,
    });
    printRows(
      `full sweep of ${size} stand-in BMCs (${Math.ceil(size / BMCS_PER_PROCESS)} fleet processes)`,
      rows,
    );
  }
}

if (process.argv[1]?.endsWith("power-status.ts")) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
