import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync } from "node:fs";
import { open, truncate, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { simulatedInventory } from "../agent/hardware/simulated/sample-inventory.ts";
import type { ConductorConfig } from "./config.ts";
import type { Conductor } from "./server.ts";

const MiB = 1024 * 1024;

/** The checkout this module runs from: the sources' folder or the bundle's (build/conductor), two deep. */
function checkoutRoot(): string {
  let dir = import.meta.dirname;
  while (!existsSync(join(dir, "package.json")) && dirname(dir) !== dir) dir = dirname(dir);
  return dir;
}
const say = (line: string): void => {
  process.stdout.write(line + "\n");
};

async function request(url: string, init: { method: string; body?: unknown }): Promise<unknown> {
  const response = await fetch(url, {
    method: init.method,
    headers: { "Content-Type": "application/json", "X-OpenStack-Ironic-API-Version": "latest" },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${init.method} ${url}: ${response.status} ${text}`);
  return text ? (JSON.parse(text) as unknown) : null;
}

/** A 1 GiB disk image with 96 MiB of data in it: big enough to watch it stream, sparse on disk. */
async function makeImage(path: string): Promise<void> {
  await writeFile(path, "");
  await truncate(path, 1024 * MiB);
  const handle = await open(path, "r+");
  try {
    for (let i = 0; i < 12; i++) await handle.write(randomBytes(8 * MiB), 0, 8 * MiB, i * 80 * MiB);
  } finally {
    await handle.close();
  }
}

/** The simulated machine's agent: the real agent code with the simulated hardware backend (its disk is a file). */
async function startSimulatedAgent(options: {
  dir: string;
  wsUrl: string;
  mac: string;
}): Promise<ChildProcess> {
  const disk = join(options.dir, "sim-1.disk");
  await writeFile(disk, "");
  await truncate(disk, 8 * 1024 * MiB);
  const inventory = simulatedInventory({
    macs: [options.mac],
    disks: [{ name: disk, size: 8 * 1024 * MiB, serial: "SIM-DEMO-1" }],
    cpus: 16,
    memoryMb: 32768,
    bootMode: "uefi",
    hostname: "sim-1",
  });
  const machine = join(options.dir, "sim-1.json");
  await writeFile(machine, JSON.stringify({ inventory }, null, 2));
  const root = checkoutRoot();
  return spawn(
    process.execPath,
    [
      "--import",
      "tsx",
      join(root, "agent/main.ts"),
      "service",
      "--conductor",
      options.wsUrl,
      "--backend",
      "simulated",
      "--inventory",
      machine,
      "--log-level",
      "warn",
    ],
    { stdio: ["ignore", "ignore", "inherit"], cwd: root },
  );
}

/**
 * Enrolls fake-hardware demo nodes and walks one from enroll to active; then a simulated machine (the real
 * agent on simulated hardware) is inspected, cleaned and deployed with a real 1 GiB image written to a file.
 */
export async function runDemo(
  conductor: Conductor,
  options: { url: string; config: ConductorConfig },
): Promise<void> {
  const { url, config } = options;
  const api = `${url}/v1`;
  const names = ["demo-1", "demo-2", "demo-3"];
  for (const name of names) {
    if (await conductor.store.getNode(name)) continue;
    await request(`${api}/nodes`, {
      method: "POST",
      body: {
        name,
        driver: "fake-hardware",
        resource_class: "demo",
        properties: { cpus: 8, memory_mb: 16384, local_gb: 200, cpu_arch: "x86_64" },
        driver_info: { ipmi_address: "192.0.2.10", ipmi_password: "secret" },
      },
    });
  }
  say(`\nAnvil conductor on ${url} (embedded SQLite at ${config.databasePath})`);
  const watch = (name: string, uuid: string) =>
    conductor.events.subscribe((event) => {
      if (event.node !== uuid) return;
      if (event.type === "provision") {
        say(`  ${name}: ${String(event.from)} --${String(event.event)}--> ${String(event.provision_state)}`);
      }
    });
  const settle = async (node: string, stable: string): Promise<void> => {
    for (;;) {
      const current = await conductor.store.getNode(node);
      if (!current || current.provision_state === stable) return;
      if (current.provision_state.endsWith("failed"))
        throw new Error(`${node}: ${current.last_error ?? "failed"}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const walk = async (
    node: string,
    steps: [target: string, stable: string, from: string][],
  ): Promise<void> => {
    for (const [target, stable, from] of steps) {
      if ((await conductor.store.getNode(node))?.provision_state !== from) continue;
      await request(`${api}/nodes/${node}/states/provision`, { method: "PUT", body: { target } });
      await settle(node, stable);
    }
  };

  const demo1 = await conductor.store.getNode("demo-1");
  if (!demo1) return;
  say(`fake-hardware node demo-1 starts in "${demo1.provision_state}"`);
  let unwatch = watch("demo-1", demo1.uuid);
  await walk("demo-1", [
    ["manage", "manageable", "enroll"],
    ["provide", "available", "manageable"],
    ["active", "active", "available"],
  ]);
  unwatch();
  say(`demo-1 is active.\n`);

  // a simulated machine: the real agent, its disk a file, the image served by this conductor
  const dir = join(config.dataDir, "sim");
  mkdirSync(dir, { recursive: true });
  mkdirSync(config.images.localRoot ?? join(config.dataDir, "images"), { recursive: true });
  const image = resolve(config.images.localRoot ?? join(config.dataDir, "images"), "demo-1g.raw");
  const mac = "52:54:00:de:00:01";
  if (!(await conductor.store.getNode("sim-1"))) {
    say("preparing a 1 GiB demo image ...");
    await makeImage(image);
    const created = (await request(`${api}/nodes`, {
      method: "POST",
      body: {
        name: "sim-1",
        driver: "fake-hardware",
        deploy_interface: "direct",
        inspect_interface: "agent",
        resource_class: "demo",
        instance_info: { image_source: `file://${image}` },
      },
    })) as { uuid: string };
    await request(`${api}/ports`, { method: "POST", body: { node_uuid: created.uuid, address: mac } });
  }
  const sim = await conductor.store.getNode("sim-1");
  if (!sim) return;
  // The machine "powers on" into the ramdisk when the conductor first waits for it, as a real one would:
  // an agent dialling before that would only be turned away as unknown.
  let agent: ChildProcess | undefined;
  const bootAgent = async (): Promise<void> => {
    if (agent) return;
    agent = await startSimulatedAgent({ dir, wsUrl: `${url.replace(/^http/, "ws")}/v1/agent`, mac });
    process.once("exit", () => agent?.kill());
  };
  const unboot = conductor.events.subscribe((event) => {
    if (
      event.node === sim.uuid &&
      event.type === "provision" &&
      String(event.provision_state).endsWith("wait")
    )
      void bootAgent();
  });
  if (sim.provision_state !== "enroll" && sim.provision_state !== "manageable") await bootAgent();
  say(
    `simulated node sim-1 (agent on simulated hardware, disk ${join(dir, "sim-1.disk")}) starts in "${sim.provision_state}"`,
  );
  unwatch = watch("sim-1", sim.uuid);
  let lastShown = 0;
  const unprogress = conductor.events.subscribe((event) => {
    if (event.node !== sim.uuid || event.type !== "progress") return;
    const progress = event.progress as {
      bytes_done?: number;
      bytes_total?: number | null;
      rate_bps?: number;
    };
    const done = progress.bytes_done ?? 0;
    if (done - lastShown < 128 * MiB && done !== progress.bytes_total) return;
    lastShown = done;
    const total = progress.bytes_total ? ` / ${(progress.bytes_total / MiB).toFixed(0)} MiB` : "";
    say(
      `    write_image: ${(done / MiB).toFixed(0)} MiB${total} at ${((progress.rate_bps ?? 0) / MiB).toFixed(0)} MiB/s`,
    );
  });
  await walk("sim-1", [
    ["manage", "manageable", "enroll"],
    ["inspect", "manageable", "manageable"],
    ["provide", "available", "manageable"],
    ["active", "active", "available"],
  ]);
  unwatch();
  unprogress();
  unboot();
  const props = (await conductor.store.getNode("sim-1"))?.properties ?? {};
  say(
    `sim-1 is active: inspected as ${String(props.cpus)} CPUs, ${String(props.memory_mb)} MiB, ${String(props.local_gb)} GiB; image written to its disk file.\n`,
  );
  say(`Watch the fleet in the dashboard: ${url}/ui/`);
  say(`Try the stock client (Debian: python3-ironicclient):`);
  say(`  baremetal --os-auth-type none --os-endpoint ${url} node list`);
  say(`  baremetal --os-auth-type none --os-endpoint ${url} node undeploy demo-1 --wait 60`);
  say(`or Anvil's CLI:  npm run anvil -- --url ${url} node list`);
  say(`Press Ctrl-C to stop.`);
}
