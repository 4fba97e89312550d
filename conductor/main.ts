import { parseArgs } from "node:util";
import { createLogger } from "../shared/log.ts";
import { ConductorConfig } from "./config.ts";
import { runDemo } from "./demo.ts";
import { createConductor } from "./server.ts";

const USAGE = `anvil-conductor [options]
  --host HOST               listen address (default 127.0.0.1)
  --port PORT               listen port (default 6385, Ironic's)
  --db PATH|URL             SQLite file (default .anvil/anvil.sqlite; ":memory:" for a throwaway),
                            or postgresql://user@host:port/db for several conductors sharing one fleet
  --data-dir DIR            boot files and state (default .anvil)
  --name NAME               conductor name shown in reservations (default 127.0.0.1)
  --public-url URL          how nodes reach this conductor (default http://HOST:PORT)
  --boot ipxe|pxe           boot interface of the ipmi hardware type (default ipxe)
  --deploy-kernel URL       default deploy kernel
  --deploy-ramdisk URL      default deploy ramdisk
  --fast-track              keep the agent running between inspect/clean and deploy
  --image-root DIR          serve file:// images under DIR to agents (small setups)
  --fake-delay-ms MS        duration of each fake-hardware step (default 0)
  --power-sync-interval S   seconds between power-state syncs, 0 disables (default 60)
  --conductor-group GROUP   serve only nodes of this conductor_group (default "")
  --heartbeat-interval S    seconds between heartbeats in the conductors table (default 10)
  --dead-after S            a conductor silent this long is dead; its nodes are taken over (default 60)
  --demo                    enroll fake-hardware demo nodes and walk one from enroll to active
  --log-level LEVEL         pino level (default info)`;

function env(name: string): string | undefined {
  const value = process.env[name];
  return value === undefined || value === "" ? undefined : value;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      host: { type: "string" },
      port: { type: "string" },
      db: { type: "string" },
      "data-dir": { type: "string" },
      name: { type: "string" },
      "public-url": { type: "string" },
      boot: { type: "string" },
      "deploy-kernel": { type: "string" },
      "deploy-ramdisk": { type: "string" },
      "fast-track": { type: "boolean" },
      "image-root": { type: "string" },
      "fake-delay-ms": { type: "string" },
      "power-sync-interval": { type: "string" },
      "conductor-group": { type: "string" },
      "heartbeat-interval": { type: "string" },
      "dead-after": { type: "string" },
      demo: { type: "boolean" },
      "log-level": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    console.log(USAGE);
    return;
  }
  const num = (value: string | undefined): number | undefined =>
    value === undefined ? undefined : Number(value);
  const demo = values.demo ?? false;
  const dataDir = values["data-dir"] ?? env("ANVIL_DATA_DIR") ?? (demo ? ".anvil/demo" : ".anvil");
  const parsed = ConductorConfig.safeParse({
    host: values.host ?? env("ANVIL_HOST"),
    port: num(values.port ?? env("ANVIL_PORT")),
    databasePath: values.db ?? env("ANVIL_DB") ?? `${dataDir}/anvil.sqlite`,
    dataDir,
    name: values.name ?? env("ANVIL_NAME"),
    publicUrl: values["public-url"] ?? env("ANVIL_PUBLIC_URL"),
    fakeDelayMs: num(values["fake-delay-ms"] ?? env("ANVIL_FAKE_DELAY_MS")) ?? (demo ? 800 : undefined),
    boot: {
      kind: values.boot,
      deployKernel: values["deploy-kernel"] ?? env("ANVIL_DEPLOY_KERNEL"),
      deployRamdisk: values["deploy-ramdisk"] ?? env("ANVIL_DEPLOY_RAMDISK"),
    },
    // the demo's simulated machine keeps its agent between jobs, as fast track does on real hardware
    agent: { fastTrack: values["fast-track"] ?? (demo ? true : undefined) },
    images: {
      localRoot: values["image-root"] ?? env("ANVIL_IMAGE_ROOT") ?? (demo ? `${dataDir}/images` : undefined),
    },
    powerSync: { intervalS: num(values["power-sync-interval"] ?? env("ANVIL_POWER_SYNC_INTERVAL")) },
    cluster: {
      group: values["conductor-group"] ?? env("ANVIL_CONDUCTOR_GROUP"),
      heartbeatIntervalS: num(values["heartbeat-interval"] ?? env("ANVIL_HEARTBEAT_INTERVAL")),
      deadAfterS: num(values["dead-after"] ?? env("ANVIL_DEAD_AFTER")),
    },
    logLevel: values["log-level"] ?? env("ANVIL_LOG_LEVEL"),
  });
  if (!parsed.success) {
    console.error(
      `anvil-conductor: bad configuration: ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`,
    );
    process.exitCode = 2;
    return;
  }
  const config = parsed.data;
  const logger = createLogger({ level: config.logLevel, name: "conductor" });
  const conductor = createConductor(config, { logger });
  const url = await conductor.start();
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    conductor.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
  if (demo) await runDemo(conductor, { url, config });
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
