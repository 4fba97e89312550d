// The power sync over Redfish: N nodes with the redfish driver, each with its own simulated BMC (a loopback
// address of its own, so one connection pool and one session per BMC as in a real fleet), answering after the
// same latency the ipmitool rows use. Child processes serve the BMCs; the conductor's CPU is measured alone.
import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { runPowerSyncPass, POWER_SYNC_FIT } from "../../conductor/cluster/power-sync.ts";
import { storePowerSyncPort } from "../../conductor/cluster/power-sync-port.ts";
import { defaultConfig } from "../../conductor/config.ts";
import { openStore } from "../../conductor/db/open-store.ts";
import { redfishHardwareOf } from "../../conductor/drivers/registry.ts";
import { driverRegistry } from "../../conductor/drivers/hardware-type.ts";
import { newNode } from "../../conductor/operations/node-record.ts";
import { standaloneOperations } from "../../conductor/operations/standalone.ts";
import { benchBmcHost } from "./redfish-bmc-fleet.ts";

// a child serves at most this many BMCs: each is a listening socket and an accepted one (ulimit -n 20000)
const PER_CHILD = 4000;

export interface PassFigures {
  seconds: number;
  checked: number;
  inSync: number;
  workers: number;
  /** Conductor CPU per node checked during the pass (the BMCs run in child processes, not counted). */
  cpuMsPerCall: number;
}

export interface RedfishSyncResult {
  cold: PassFigures;
  warm: PassFigures;
  /** Conductor CPU per getPowerState on a warm connection, one call at a time. */
  cpuMsPerCall: number;
  medianMs: number;
}

async function startFleet(count: number, port: number, latencyMs: number): Promise<ChildProcess[]> {
  const children: ChildProcess[] = [];
  for (let first = 0; first < count; first += PER_CHILD) {
    const n = Math.min(PER_CHILD, count - first);
    const child = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        "scripts/bench/redfish-bmc-fleet.ts",
        String(first),
        String(n),
        String(port),
        String(latencyMs),
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    children.push(child);
    await new Promise<void>((resolve, reject) => {
      createInterface({ input: child.stdout! }).on("line", (line) => {
        if (line.includes('"ready"')) resolve();
      });
      child.once("exit", (code) => reject(new Error(`BMC fleet exited with ${code}`)));
    });
  }
  return children;
}

/** Seeds `count` redfish nodes (available, powered off like their BMCs), then syncs them twice. */
export async function redfishPowerSync(
  database: string,
  options: { count: number; latencyMs: number },
): Promise<RedfishSyncResult> {
  const port = 20_000 + Math.floor(Math.random() * 20_000);
  const children = await startFleet(options.count, port, Math.round(options.latencyMs));
  const config = defaultConfig();
  const hw = redfishHardwareOf(config, { pollIntervalMs: 100 });
  const drivers = driverRegistry([hw]);
  const store = openStore(database);
  try {
    const uuids: string[] = [];
    for (let i = 0; i < options.count; i++) {
      const node = newNode(
        {
          driver: "redfish",
          name: `rf-${i}`,
          driver_info: {
            redfish_address: `http://${benchBmcHost(i)}:${port}`,
            redfish_system_id: "/redfish/v1/Systems/1",
            redfish_username: "admin",
            redfish_password: "password",
          },
        },
        hw,
      );
      uuids.push(node.uuid);
      await store.createNode({ ...node, provision_state: "available", power_state: "power off" });
    }
    const defaults = config.powerSync;
    const pass = async (): Promise<PassFigures> => {
      const cpuBefore = process.cpuUsage();
      const started = performance.now();
      const report = await runPowerSyncPass(
        storePowerSyncPort(standaloneOperations({ store, drivers, holder: "sync-rf", config })),
        {
          concurrency: defaults.concurrency,
          maxConcurrency: defaults.maxConcurrency,
          fitWithinMs: defaults.intervalS * 1000 * POWER_SYNC_FIT,
          forcePowerStateDuringSync: true,
          maxFailures: 3,
        },
      );
      const cpuUsed = process.cpuUsage(cpuBefore);
      return {
        seconds: (performance.now() - started) / 1000,
        cpuMsPerCall: (cpuUsed.user + cpuUsed.system) / 1000 / Math.max(1, report.checked),
        checked: report.checked,
        inSync: report.outcomes["in sync"],
        workers: report.workers,
      };
    };
    const cold = await pass();
    const warm = await pass();
    // one call at a time on warm connections: the conductor's CPU per Redfish power read
    const node = (await store.getNode(uuids[0]!))!;
    const driverNode = { ...node, ports: [] };
    const calls = 200;
    const times: number[] = [];
    const cpu = process.cpuUsage();
    for (let i = 0; i < calls; i++) {
      const t = performance.now();
      await hw.power.getPowerState(driverNode);
      times.push(performance.now() - t);
    }
    const used = process.cpuUsage(cpu);
    times.sort((a, b) => a - b);
    return {
      cold,
      warm,
      cpuMsPerCall: (used.user + used.system) / 1000 / calls,
      medianMs: times[Math.floor(calls / 2)] ?? NaN,
    };
  } finally {
    await hw.stop?.();
    await store.close();
    for (const child of children) child.kill("SIGTERM");
  }
}
