// The lab's Redfish BMC as a process: one service for several systems, each an in-memory machine or a lab
// QEMU node driven through QMP.
//   node --import tsx scripts/lab/redfish/main.ts --port 8000 --memory node1 \
//     --qemu node2=<dir with qemu.args> [--tls-cert c.pem --tls-key k.pem]
// A QEMU node's dir may hold system.json (what the System shows: uuid, cpus, memoryMiB, disks, macs); its
// actions are logged to hook.log in the ipmi_sim lab hook's format.
// The user name and password come from ANVIL_REDFISH_USERNAME / ANVIL_REDFISH_PASSWORD (never argv).
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { MemoryMachine } from "./machine.ts";
import { QemuMachine } from "./qmp.ts";
import { startRedfishBmc, type SystemSpec } from "./server.ts";

/** The System's inventory as a lab node's dir describes it (system.json), or nothing. */
function describedSystem(dir: string): Omit<SystemSpec, "id" | "machine"> {
  const file = join(dir, "system.json");
  if (!existsSync(file)) return {};
  const { uuid, cpus, memoryMiB, disks, macs } = JSON.parse(readFileSync(file, "utf8")) as Omit<
    SystemSpec,
    "id" | "machine"
  >;
  // an absent field keeps the service's default (a spread undefined would replace it)
  return Object.fromEntries(
    Object.entries({ uuid, cpus, memoryMiB, disks, macs }).filter(([, value]) => value !== undefined),
  );
}

const { values } = parseArgs({
  options: {
    port: { type: "string", default: "8000" },
    memory: { type: "string", multiple: true, default: [] },
    qemu: { type: "string", multiple: true, default: [] },
    "tls-cert": { type: "string" },
    "tls-key": { type: "string" },
    "latency-ms": { type: "string", default: "0" },
  },
});

const systems: SystemSpec[] = [];
for (const id of values.memory) systems.push({ id, machine: new MemoryMachine() });
for (const entry of values.qemu) {
  const [id, dir] = entry.split("=", 2);
  if (!id || !dir) throw new Error(`--qemu wants <id>=<vm dir>, got ${entry}`);
  const argv = readFileSync(join(dir, "qemu.args"), "utf8")
    .split("\n")
    .filter((line) => line !== "");
  systems.push({
    ...describedSystem(dir),
    id,
    machine: new QemuMachine({
      argv,
      qmpSocket: join(dir, "qmp.sock"),
      eventLog: join(dir, "hook.log"),
      serialSocket: join(dir, "serial.sock"),
    }),
  });
}
if (systems.length === 0) systems.push({ id: "system-0", machine: new MemoryMachine() });

const tls =
  values["tls-cert"] && values["tls-key"]
    ? { cert: readFileSync(values["tls-cert"]), key: readFileSync(values["tls-key"]) }
    : undefined;
const bmc = await startRedfishBmc({
  systems,
  port: Number(values.port),
  tls,
  latencyMs: Number(values["latency-ms"]),
  username: process.env.ANVIL_REDFISH_USERNAME ?? "admin",
  password: process.env.ANVIL_REDFISH_PASSWORD ?? "password",
});
console.log(JSON.stringify({ url: bmc.url, systems: systems.map((s) => `/redfish/v1/Systems/${s.id}`) }));
const stop = () => void bmc.stop().then(() => process.exit(0));
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
