/**
 * Load test of the agent gateway: N simulated agents (the real AgentLink, in a few processes) connect to
 * one gateway and heartbeat every 5 s; the gateway process reports its CPU share and RSS over a window.
 * Goals: 1,000 agents under 10% of a core and under 300 MB RSS. Prints numbers; asserts nothing.
 * Usage: node --import tsx scripts/bench/agents.ts [--agents 1000] [--seconds 60] [--processes 2]
 */
import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { COMMANDS } from "../../agent/commands/registry.ts";
import { SimulatedBackend } from "../../agent/hardware/simulated/simulated-backend.ts";
import { AgentLink } from "../../agent/link/client.ts";
import { createAgentGateway } from "../../conductor/agents/gateway.ts";
import { MemoryAgentDirectory } from "../../conductor/agents/memory-directory.ts";
import { silentLogger } from "../../shared/log.ts";
import type { Inventory } from "../../shared/inventory.ts";
import { exec } from "../../shared/system/exec.ts";
import { fleetMac, fleetUuid } from "./fleet-ids.ts";

const SELF = resolve(import.meta.dirname, "agents.ts");
const HEARTBEAT_INTERVAL_MS = 5_000;

const { values } = parseArgs({
  options: {
    role: { type: "string", default: "orchestrate" },
    agents: { type: "string", default: "1000" },
    seconds: { type: "string", default: "60" },
    processes: { type: "string", default: "2" },
    port: { type: "string", default: "0" },
    from: { type: "string", default: "0" },
    count: { type: "string", default: "0" },
  },
});

/** The gateway side: waits for every agent, then measures its own CPU time and RSS over the window. */
async function gateway(): Promise<void> {
  const agents = Number(values.agents);
  const directory = new MemoryAgentDirectory();
  for (let i = 0; i < agents; i++) directory.addNode({ uuid: fleetUuid(i), macs: [fleetMac(i)] });
  const gw = createAgentGateway({
    directory,
    logger: silentLogger,
    heartbeatTimeoutMs: 3 * HEARTBEAT_INTERVAL_MS,
    // every simulated agent dials from 127.0.0.1: one source holding the whole fleet
    maxConnectionsPerSource: agents + 16,
    maxConnections: agents + 16,
  });
  let connected = 0;
  let reconnects = 0;
  gw.onConnected(() => (connected += 1));
  gw.onDisconnected(() => {
    connected -= 1;
    reconnects += 1;
  });
  const server = createServer();
  gw.attach(server);
  server.listen(Number(values.port), "127.0.0.1");
  await once(server, "listening");
  const idleRss = process.memoryUsage.rss();
  const rampStart = Date.now();
  while (connected < agents) await new Promise((done) => setTimeout(done, 100));
  const rampMs = Date.now() - rampStart;
  // Let the ramp's garbage settle so the window measures the steady state.
  await new Promise((done) => setTimeout(done, HEARTBEAT_INTERVAL_MS));
  const seconds = Number(values.seconds);
  const cpuStart = process.cpuUsage();
  const wallStart = process.hrtime.bigint();
  let peakRss = process.memoryUsage.rss();
  for (let s = 0; s < seconds; s++) {
    await new Promise((done) => setTimeout(done, 1_000));
    peakRss = Math.max(peakRss, process.memoryUsage.rss());
  }
  const cpu = process.cpuUsage(cpuStart);
  const wallUs = Number(process.hrtime.bigint() - wallStart) / 1_000;
  const calls = await Promise.all(
    Array.from({ length: Math.min(agents, 50) }, (_, i) =>
      gw.call(fleetUuid(i), { name: "get_clean_steps" }).then(() => 1),
    ),
  );
  const report = {
    agents,
    connected_at_end: connected,
    disconnects_during_run: reconnects,
    ramp_ms: rampMs,
    window_s: seconds,
    heartbeat_interval_ms: HEARTBEAT_INTERVAL_MS,
    gateway_cpu_percent_of_core: +(((cpu.user + cpu.system) / wallUs) * 100).toFixed(2),
    gateway_peak_rss_mib: +(peakRss / 1024 / 1024).toFixed(1),
    gateway_idle_rss_mib: +(idleRss / 1024 / 1024).toFixed(1),
    sample_calls_ok: calls.length,
  };
  process.stdout.write(JSON.stringify(report) + "\n");
  await gw.close();
  server.close();
}

/** A load process: `count` real AgentLinks, each with its own simulated machine. */
async function agentsProcess(): Promise<void> {
  const from = Number(values.from);
  const count = Number(values.count);
  const url = `ws://127.0.0.1:${values.port}/v1/agent`;
  for (let i = from; i < from + count; i++) {
    const link = new AgentLink({
      url,
      backend: new SimulatedBackend({ inventory: inventoryFor(i) }),
      commands: COMMANDS,
      logger: silentLogger,
      agentVersion: "bench",
      backoff: { initialMs: 200, maxMs: 5_000 },
    });
    link.start();
    if (i % 50 === 0) await new Promise((done) => setTimeout(done, 10)); // don't SYN-flood the listener
  }
  await new Promise(() => undefined); // run until killed
}

function inventoryFor(index: number): Inventory {
  return {
    interfaces: [
      {
        name: "eth0",
        mac_address: fleetMac(index),
        ipv4_address: null,
        ipv6_address: null,
        has_carrier: true,
        lldp: null,
        vendor: null,
        product: null,
        client_id: null,
        biosdevname: null,
        speed_mbps: null,
        pci_address: null,
        driver: null,
      },
    ],
    cpu: {
      model_name: "sim",
      frequency: "2000.0000",
      count: 4,
      architecture: "x86_64",
      flags: [],
      socket_count: 1,
    },
    disks: [],
    memory: { total: 8 * 1024 ** 3, physical_mb: 8192 },
    bmc_address: null,
    bmc_v6address: null,
    system_vendor: {
      product_name: "",
      serial_number: "",
      manufacturer: "",
      firmware: { vendor: "", version: "", build_date: "" },
    },
    boot: { current_boot_mode: "bios", pxe_interface: null },
    hostname: `sim-${index}`,
  };
}

async function orchestrate(): Promise<void> {
  const agents = Number(values.agents);
  const processes = Math.max(1, Number(values.processes));
  const probe = createServer().listen(0, "127.0.0.1");
  await once(probe, "listening");
  const port = (probe.address() as AddressInfo).port;
  await new Promise((done) => probe.close(done));
  const tsx = [process.execPath, "--import", "tsx", SELF];
  const common = ["--agents", String(agents), "--port", String(port)];
  const gatewayRun = exec(
    tsx[0] as string,
    [...tsx.slice(1), "--role", "gateway", ...common, "--seconds", values.seconds],
    {
      timeoutMs: (Number(values.seconds) + 300) * 1000,
    },
  );
  await new Promise((done) => setTimeout(done, 1_500));
  const load = new AbortController();
  const per = Math.ceil(agents / processes);
  const loaders = Array.from({ length: processes }, (_, p) =>
    exec(
      tsx[0] as string,
      [
        ...tsx.slice(1),
        "--role",
        "agents",
        ...common,
        "--from",
        String(p * per),
        "--count",
        String(Math.min(per, agents - p * per)),
      ],
      { signal: load.signal },
    ).catch(() => undefined),
  );
  const result = await gatewayRun;
  load.abort();
  await Promise.all(loaders);
  if (result.code !== 0) throw new Error(`gateway process failed: ${result.stderr}`);
  const report = JSON.parse(result.stdout.trim().split("\n").at(-1) ?? "{}") as Record<string, number>;
  process.stdout.write(
    JSON.stringify(
      {
        ...report,
        load_processes: processes,
        goal_cpu_under_10_percent: (report.gateway_cpu_percent_of_core ?? Infinity) < 10,
        goal_rss_under_300_mb: (report.gateway_peak_rss_mib ?? Infinity) * 1.048576 < 300,
      },
      null,
      2,
    ) + "\n",
  );
}

const roles: Record<string, () => Promise<void>> = { orchestrate, gateway, agents: agentsProcess };
const role = roles[values.role];
if (role === undefined) {
  process.stderr.write(`unknown role ${values.role}\n`);
  process.exitCode = 2;
} else {
  role().catch((error: unknown) => {
    process.stderr.write(
      `bench:agents (${values.role}) failed: ${error instanceof Error ? error.stack : String(error)}\n`,
    );
    process.exitCode = 1;
  });
}
