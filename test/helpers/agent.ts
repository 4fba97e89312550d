import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdir, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { join, resolve } from "node:path";
import { exec } from "../../shared/system/exec.ts";
import type { Inventory } from "../../shared/inventory.ts";
import { simulatedInventory } from "../../agent/hardware/simulated/sample-inventory.ts";
import type { Logger } from "../../shared/log.ts";
import { createAgentGateway } from "../../conductor/agents/gateway.ts";
import type { AgentGateway, AgentGatewayOptions } from "../../conductor/agents/gateway.ts";

export const ROOT = resolve(import.meta.dirname, "../..");
export const AGENT_EXECUTABLE = join(ROOT, "build/anvil-agent");

/**
 * Builds the agent single executable when it is missing or older than its sources. A file lock keeps
 * two test workers from building at once; the second finds it fresh.
 */
export async function ensureAgentBuilt(): Promise<string> {
  await mkdir(join(ROOT, "build"), { recursive: true });
  const result = await exec(
    "flock",
    [
      join(ROOT, "build/.anvil-agent.lock"),
      process.execPath,
      "--import",
      "tsx",
      "scripts/build/agent.ts",
      "--if-stale",
    ],
    { cwd: ROOT, timeoutMs: 300_000, env: { HOME: process.env.HOME ?? "/root" } },
  );
  if (result.code !== 0) throw new Error(`building the agent failed: ${result.stderr}`);
  return AGENT_EXECUTABLE;
}

/** A logger that keeps every line (objects and messages serialised), for "never logged" assertions. */
export function recordingLogger(lines: string[] = []): Logger & { lines: string[] } {
  const record =
    (level: string) =>
    (obj: object | string, msg?: string): void => {
      lines.push(`${level} ${typeof obj === "string" ? obj : JSON.stringify(obj)} ${msg ?? ""}`);
    };
  const logger: Logger & { lines: string[] } = {
    lines,
    debug: record("debug"),
    info: record("info"),
    warn: record("warn"),
    error: record("error"),
    child: (bindings) => {
      const child = recordingLogger(lines);
      const wrap =
        (fn: (obj: object | string, msg?: string) => void) =>
        (obj: object | string, msg?: string): void =>
          fn(typeof obj === "string" ? { ...bindings, msg: obj } : { ...bindings, ...obj }, msg);
      return {
        ...child,
        debug: wrap(child.debug),
        info: wrap(child.info),
        warn: wrap(child.warn),
        error: wrap(child.error),
      };
    },
  };
  return logger;
}

/** A gateway on a real HTTP server on 127.0.0.1; kill() drops the server and every socket like a crash. */
export interface GatewayServer {
  gateway: AgentGateway;
  server: Server;
  port: number;
  url: string;
  kill(): Promise<void>;
}

export async function startGatewayServer(
  options: AgentGatewayOptions & { port?: number; gateway?: AgentGateway },
): Promise<GatewayServer> {
  const gateway = options.gateway ?? createAgentGateway(options);
  const server = createServer((_req, res) => res.writeHead(404).end());
  const sockets = new Set<Socket>();
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  gateway.attach(server);
  await listenRetrying(server, options.port ?? 0);
  const port = (server.address() as AddressInfo).port;
  return {
    gateway,
    server,
    port,
    url: `ws://127.0.0.1:${port}/v1/agent`,
    kill: async () => {
      const closed = new Promise<void>((done) => server.close(() => done()));
      for (const socket of sockets) socket.destroy();
      await closed;
    },
  };
}

/**
 * Listens on 127.0.0.1. A fixed port (a "restarted" server) may briefly be some other test's ephemeral
 * client port while it is free: retry EADDRINUSE for a few seconds rather than fail.
 */
async function listenRetrying(server: Server, port: number): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      server.listen(port, "127.0.0.1");
      await once(server, "listening");
      return;
    } catch (error) {
      const inUse = (error as NodeJS.ErrnoException).code === "EADDRINUSE";
      if (!inUse || port === 0 || attempt >= 50) throw error;
      server.close(() => undefined); // as Node's docs do before listening again
      await new Promise((done) => setTimeout(done, 100));
    }
  }
}

/** An IPA-shaped inventory for simulated machines (8 CPUs, 16 GiB, one 20 GiB disk). */
export function sampleInventory(options: { macs?: string[]; diskFile?: string } = {}): Inventory {
  return simulatedInventory({
    macs: options.macs ?? ["52:54:00:90:35:d6"],
    // never a real device by default: a simulated machine's disks are files a test creates
    disks: [
      {
        name: options.diskFile ?? "/nonexistent/anvil-simulated-disk",
        size: 20 * 1024 ** 3,
        serial: "SIM-0001",
      },
    ],
  });
}

/** Writes a simulated machine file for `anvil-agent --backend simulated --inventory FILE`. */
export async function writeSimulatedMachine(
  dir: string,
  inventory: Inventory,
  bootId?: string,
): Promise<string> {
  const file = join(dir, `machine-${inventory.interfaces[0]?.mac_address.replaceAll(":", "") ?? "x"}.json`);
  await writeFile(
    file,
    JSON.stringify({ inventory, ...(bootId === undefined ? {} : { boot_id: bootId }) }, null, 2),
  );
  return file;
}

/** A running agent process; stop() sends SIGTERM and resolves with everything it wrote to stderr. */
export interface AgentProcess {
  stderr(): string;
  stop(): Promise<{ code: number | null; stderr: string }>;
}

/**
 * Starts the built agent in service mode. Test-only: it needs the live process (to SIGTERM it and read
 * its log afterwards), which the product's exec() deliberately does not expose.
 */
export function startAgentProcess(options: { executable: string; args: string[] }): AgentProcess {
  const child = spawn(options.executable, options.args, { stdio: ["ignore", "pipe", "pipe"] });
  const chunks: Buffer[] = [];
  child.stderr.on("data", (chunk: Buffer) => chunks.push(chunk));
  child.stdout.on("data", (chunk: Buffer) => chunks.push(chunk));
  const exited = once(child, "exit") as Promise<[number | null]>;
  return {
    stderr: () => Buffer.concat(chunks).toString(),
    stop: async () => {
      if (child.exitCode === null) child.kill("SIGTERM");
      const [code] = await exited;
      return { code, stderr: Buffer.concat(chunks).toString() };
    },
  };
}
