import { once } from "node:events";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { WebSocketServer } from "ws";
import type { CommandTable } from "../../agent/commands/command.ts";
import { COMMANDS } from "../../agent/commands/registry.ts";
import { SimulatedBackend } from "../../agent/hardware/simulated/simulated-backend.ts";
import { AgentLink } from "../../agent/link/client.ts";
import { MemoryAgentDirectory } from "../../conductor/agents/memory-directory.ts";
import { silentLogger } from "../../shared/log.ts";
import { encodeFrame, parseFrame } from "../../shared/protocol.ts";
import type { Hello } from "../../shared/protocol.ts";
import { recordingLogger, sampleInventory, startGatewayServer } from "../helpers/agent.ts";
import { waitFor } from "../helpers/wait.ts";

const NODE = "44444444-4444-4444-8444-444444444444";
const MAC = "52:54:00:44:44:44";

/** The real link and gateway in one process; `sync` here blocks until the test lets it finish. */
async function setup() {
  const directory = new MemoryAgentDirectory();
  directory.addNode({ uuid: NODE, macs: [MAC] });
  const logger = recordingLogger();
  const gw = await startGatewayServer({ directory, logger, heartbeatTimeoutMs: 30_000 });
  let release: (() => void) | undefined;
  let started = 0;
  const commands: CommandTable = {
    ...COMMANDS,
    sync: (_args, { signal, progress }) =>
      new Promise((resolve, reject) => {
        started += 1;
        progress({ step: "flushing" });
        release = () => resolve({ flushed: true });
        signal.addEventListener("abort", () => reject(signal.reason));
      }),
  };
  const link = new AgentLink({
    url: gw.url,
    backend: new SimulatedBackend({ inventory: sampleInventory({ macs: [MAC] }) }),
    commands,
    logger: silentLogger,
    agentVersion: "test",
    backoff: { initialMs: 50, maxMs: 400 },
  });
  link.start();
  await waitFor(() => gw.gateway.isConnected(NODE), { what: "connect" });
  return {
    directory,
    gw,
    link,
    release: () => release?.(),
    started: () => started,
  };
}

const tick = (ms: number) => new Promise<"pending">((resolve) => setTimeout(() => resolve("pending"), ms));

describe("AgentLink ⇄ gateway", () => {
  let ctx: Awaited<ReturnType<typeof setup>> | undefined;
  afterEach(async () => {
    await ctx?.link.stop();
    await ctx?.gw.gateway.close();
    await ctx?.gw.kill();
    ctx = undefined;
  });

  it("a command that finishes while the link is down delivers its result after the reconnect", async () => {
    ctx = await setup();
    const { gw } = ctx;
    const progress: unknown[] = [];
    const pending = gw.gateway.call(NODE, { name: "sync" }, { onProgress: (p) => progress.push(p) });
    await waitFor(() => ctx?.started() === 1, { what: "the command to start" });
    // progress is not replayed after a reconnect: let the live link carry it before the cut
    await waitFor(() => progress.length === 1, { what: "the command's progress" });
    await gw.kill();
    await waitFor(() => !ctx?.link.connected, { what: "the link to drop" });
    ctx.release(); // finishes with nobody listening: the result must be kept
    ctx.gw = await startGatewayServer({
      directory: ctx.directory,
      logger: silentLogger,
      gateway: gw.gateway,
      port: gw.port,
    });
    await expect(pending).resolves.toEqual({ flushed: true });
    expect(ctx.started()).toBe(1); // the re-sent command was recognised, not run again
    expect(progress).toEqual([{ step: "flushing" }]);
    expect(ctx.directory.saveCount).toBe(1);
  });

  it("a second mutating command gets BUSY; inventory still runs alongside", async () => {
    ctx = await setup();
    const first = ctx.gw.gateway.call(NODE, { name: "sync" });
    await waitFor(() => ctx?.started() === 1, { what: "the first command" });
    await expect(ctx.gw.gateway.call(NODE, { name: "reboot" })).rejects.toMatchObject({
      code: "BUSY",
      retryable: true,
    });
    await expect(ctx.gw.gateway.call(NODE, { name: "get_inventory" })).resolves.toMatchObject({
      hostname: "sim-node",
    });
    ctx.release();
    await expect(first).resolves.toEqual({ flushed: true });
  });

  it("cancelling a call aborts the command on the agent, which then accepts new work", async () => {
    ctx = await setup();
    const controller = new AbortController();
    const first = ctx.gw.gateway.call(NODE, { name: "sync" }, { signal: controller.signal });
    await waitFor(() => ctx?.started() === 1, { what: "the command" });
    controller.abort();
    await expect(first).rejects.toMatchObject({ code: "CANCELLED" });
    // The agent is free again once its command has seen the abort; until then BUSY (retryable) is right.
    let second: Promise<unknown> | undefined;
    while (second === undefined) {
      const attempt = ctx.gw.gateway.call(NODE, { name: "sync" });
      const outcome = await Promise.race([
        attempt.then(
          () => "done",
          (e: { code?: string }) => e.code,
        ),
        tick(50),
      ]);
      if (outcome === "BUSY") continue;
      expect(outcome).toBe("pending");
      second = attempt;
    }
    await waitFor(() => ctx?.started() === 2, { what: "the second command" });
    ctx.release();
    await expect(second).resolves.toEqual({ flushed: true });
  });

  it("runs a command the agent does not implement as NOT_SUPPORTED", async () => {
    ctx = await setup();
    await expect(ctx.gw.gateway.call(NODE, { name: "delete_raid" })).rejects.toMatchObject({
      code: "NOT_SUPPORTED",
    });
  });
});

describe("AgentLink against a conductor that goes silent", () => {
  it("gives up on the link after three missed heartbeats and redials with its token", async () => {
    // A bare WebSocket server: welcomes every hello (issuing a token once), then never says anything.
    const wss = new WebSocketServer({ host: "127.0.0.1", port: 0 });
    await once(wss, "listening");
    const hellos: Hello[] = [];
    wss.on("connection", (socket) => {
      socket.on("message", (data) => {
        const parsed = parseFrame(data.toString(), 65536);
        if (!parsed.ok || parsed.frame.type !== "hello") return;
        hellos.push(parsed.frame);
        const token = hellos.length === 1 ? { token: "issued-once" } : {};
        socket.send(
          encodeFrame({
            type: "welcome",
            node_uuid: NODE,
            heartbeat_interval_ms: 100,
            fast_track: false,
            ...token,
          }),
        );
      });
    });
    const link = new AgentLink({
      url: `ws://127.0.0.1:${(wss.address() as AddressInfo).port}/v1/agent`,
      backend: new SimulatedBackend({ inventory: sampleInventory({ macs: [MAC] }) }),
      commands: COMMANDS,
      logger: silentLogger,
      agentVersion: "test",
      backoff: { initialMs: 20, maxMs: 50 },
    });
    try {
      link.start();
      await waitFor(() => hellos.length >= 2, { what: "a redial" });
      expect(hellos[0]?.token).toBeUndefined();
      expect(hellos[1]?.token).toBe("issued-once");
      expect(hellos[1]?.boot_id).toBe(hellos[0]?.boot_id);
    } finally {
      await link.stop();
      for (const client of wss.clients) client.terminate();
      await new Promise((done) => wss.close(done));
    }
  });
});
