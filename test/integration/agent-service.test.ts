import { mkdir, mkdtemp, readFile, rm, stat, truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MemoryAgentDirectory } from "../../conductor/agents/memory-directory.ts";
import { digestToken } from "../../conductor/agents/token.ts";
import type { Inventory } from "../../shared/inventory.ts";
import type { Hello } from "../../shared/protocol.ts";
import { exec } from "../../shared/system/exec.ts";
import {
  ROOT,
  ensureAgentBuilt,
  recordingLogger,
  sampleInventory,
  startAgentProcess,
  startGatewayServer,
  writeSimulatedMachine,
} from "../helpers/agent.ts";
import { waitFor } from "../helpers/wait.ts";
import type { AgentProcess, GatewayServer } from "../helpers/agent.ts";
import { startHttpImageServer } from "../helpers/http-image-server.ts";
import type { HttpImageServer } from "../helpers/http-image-server.ts";

const NODE = "33333333-3333-4333-8333-333333333333";
const MAC = "52:54:00:12:34:56";

describe("the agent executable in service mode against the real gateway", () => {
  let dir: string;
  let agent: AgentProcess | undefined;
  let gw: GatewayServer;
  const logger = recordingLogger();
  const directory = new MemoryAgentDirectory();
  const hellos: Hello[] = [];
  let inventory: Inventory;
  let eventsFile: string;
  let disk: string;
  let images: HttpImageServer;
  let image: Buffer;

  beforeAll(async () => {
    const executable = await ensureAgentBuilt();
    await mkdir(join(ROOT, ".tmp"), { recursive: true });
    dir = await mkdtemp(join(ROOT, ".tmp/agent-service-"));
    eventsFile = join(dir, "events.jsonl");
    disk = join(dir, "disk0.img");
    await writeFile(disk, "");
    await truncate(disk, 32 * 1024 * 1024);
    inventory = sampleInventory({ macs: [MAC, "52:54:00:12:34:57"], diskFile: disk });
    // Compressible but not trivial: text-like random words.
    image = Buffer.from(Array.from({ length: 200_000 }, (_, i) => `w${(i * 7919) % 10007} `).join(""));
    await writeFile(join(dir, "image.raw"), image);
    for (const [tool, args] of [
      ["xz", ["-k", "-3", join(dir, "image.raw")]],
      ["zstd", ["-q", "-k", join(dir, "image.raw"), "-o", join(dir, "image.raw.zst")]],
      ["gzip", ["-k", join(dir, "image.raw")]],
    ] as const) {
      const result = await exec(tool, args);
      if (result.code !== 0) throw new Error(`${tool} failed: ${result.stderr}`);
    }
    images = await startHttpImageServer();
    for (const name of ["image.raw.xz", "image.raw.zst", "image.raw.gz"])
      images.serve(`/${name}`, join(dir, name));
    directory.addNode({ uuid: NODE, macs: [MAC] });
    gw = await startGatewayServer({ directory, logger, heartbeatTimeoutMs: 30_000 });
    gw.gateway.onConnected((_uuid, hello) => hellos.push(hello));
    const machine = await writeSimulatedMachine(dir, inventory);
    agent = startAgentProcess({
      executable,
      args: [
        "service",
        "--conductor",
        gw.url,
        "--backend",
        "simulated",
        "--inventory",
        machine,
        "--events",
        eventsFile,
        "--log-level",
        "debug",
      ],
    });
  }, 300_000);

  afterAll(async () => {
    await agent?.stop();
    await gw?.gateway.close();
    await gw?.kill();
    await images?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("connects and answers get_inventory with the simulated inventory", async () => {
    await waitFor(() => gw.gateway.isConnected(NODE), { what: "the agent to connect" });
    const value = await gw.gateway.call(NODE, { name: "get_inventory" });
    expect(value).toEqual(inventory);
    expect(hellos[0]).toMatchObject({
      macs: [MAC, "52:54:00:12:34:57"],
      bmc_address: "127.0.0.1",
    });
    expect(hellos[0]?.token).toBeUndefined();
    expect(directory.saveCount).toBe(1);
  });

  it("reconnects with its token after the conductor's server dies, and a call completes", async () => {
    await gw.kill();
    await waitFor(() => !gw.gateway.isConnected(NODE), { what: "the session to drop" });
    gw = await startGatewayServer({ directory, logger, gateway: gw.gateway, port: gw.port });
    await waitFor(() => gw.gateway.isConnected(NODE), { what: "the agent to reconnect" });
    const second = hellos[1];
    expect(second?.boot_id).toBe(hellos[0]?.boot_id);
    expect(second?.token).toBeDefined();
    expect(digestToken(second?.token ?? "")).toBe(directory.tokens.get(NODE)?.digest);
    expect(directory.saveCount).toBe(1); // no second token for the same boot
    await expect(gw.gateway.call(NODE, { name: "sync" })).resolves.toEqual({});
    const steps = (await gw.gateway.call(NODE, { name: "get_clean_steps" })) as {
      clean_steps: Array<{ step: string }>;
    };
    expect(steps.clean_steps.map((step) => step.step)).toContain("erase_devices_metadata");
  });

  it.each(["image.raw.xz", "image.raw.zst", "image.raw.gz"])(
    "write_image decompresses %s inside the single executable",
    async (name) => {
      await writeFile(disk, "");
      await truncate(disk, 32 * 1024 * 1024);
      const value = (await gw.gateway.call(NODE, {
        name: "write_image",
        args: { image: { url: `${images.url}/${name}`, image_type: "whole-disk" } },
      })) as { image_bytes: number };
      expect(value.image_bytes).toBe(image.length);
      const written = await readFile(disk);
      expect(written.subarray(0, image.length).equals(image)).toBe(true);
    },
  );

  it("reboots only after its result was acknowledged", async () => {
    await expect(gw.gateway.call(NODE, { name: "reboot" })).resolves.toEqual({ rebooting: true });
    let events: string[] = [];
    await waitFor(
      () => {
        void readFile(eventsFile, "utf8").then(
          (text) =>
            (events = text
              .trim()
              .split("\n")
              .map((line) => (JSON.parse(line) as { event: string }).event)),
          () => undefined,
        );
        return events.includes("reboot");
      },
      { what: "the reboot event" },
    );
    expect(events).toEqual(["sync", "sync", "reboot"]);
  });

  it("never logs the token, on either side", async () => {
    const token = hellos[1]?.token ?? "";
    expect(token.length).toBeGreaterThan(20);
    const { stderr } = await (agent as AgentProcess).stop();
    agent = undefined;
    expect(stderr).toMatch(/welcomed by the conductor/);
    expect(stderr).not.toContain(token);
    for (const line of logger.lines) expect(line).not.toContain(token);
  });
});

describe("the agent executable restarted within one boot", () => {
  const node = "66666666-6666-4666-8666-666666666666";
  const mac = "52:54:00:66:66:66";
  let dir: string;
  let gw: GatewayServer;
  let executable: string;
  const running: AgentProcess[] = [];
  const directory = new MemoryAgentDirectory();
  const hellos: Hello[] = [];

  beforeAll(async () => {
    executable = await ensureAgentBuilt();
    await mkdir(join(ROOT, ".tmp"), { recursive: true });
    dir = await mkdtemp(join(ROOT, ".tmp/agent-restart-"));
    directory.addNode({ uuid: node, macs: [mac] });
    gw = await startGatewayServer({ directory, logger: recordingLogger() });
    gw.gateway.onConnected((_uuid, hello) => hellos.push(hello));
  }, 300_000);

  afterAll(async () => {
    for (const agent of running) await agent.stop();
    await gw?.gateway.close();
    await gw?.kill();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const start = async (extra: string[]): Promise<AgentProcess> => {
    const machine = await writeSimulatedMachine(dir, sampleInventory({ macs: [mac] }), "one-boot");
    const agent = startAgentProcess({
      executable,
      args: ["service", "--conductor", gw.url, "--backend", "simulated", "--inventory", machine, ...extra],
    });
    running.push(agent);
    return agent;
  };

  it("keeps its token in --token-file (mode 0600) and is welcomed back without a new one", async () => {
    const tokenFile = join(dir, "token");
    const first = await start(["--token-file", tokenFile]);
    await waitFor(() => gw.gateway.isConnected(node), { what: "the first run to connect" });
    let kept = "";
    await waitFor(
      () => {
        void readFile(tokenFile, "utf8").then(
          (text) => (kept = text),
          () => undefined,
        );
        return kept !== "";
      },
      { what: "the token file" },
    );
    expect(digestToken(kept)).toBe(directory.tokens.get(node)?.digest);
    expect((await stat(tokenFile)).mode & 0o777).toBe(0o600);
    await first.stop();
    await waitFor(() => !gw.gateway.isConnected(node), { what: "the first run to go" });
    await start(["--token-file", tokenFile]);
    await waitFor(() => gw.gateway.isConnected(node), { what: "the second run to connect" });
    expect(hellos.map((hello) => hello.token === undefined)).toEqual([true, false]);
    expect(directory.saveCount).toBe(1);
    await running.pop()?.stop();
  });

  it("without the file, a restarted agent is refused: the conductor never issues a second token per boot", async () => {
    const agent = await start([]);
    await waitFor(() => agent.stderr().includes("TOKEN_REQUIRED"), { what: "the refusal" });
    expect(gw.gateway.isConnected(node)).toBe(false);
    expect(directory.saveCount).toBe(1);
  });
});
