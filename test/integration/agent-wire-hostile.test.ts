import type { Socket } from "node:net";
import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import { MemoryAgentDirectory } from "../../conductor/agents/memory-directory.ts";
import { recordingLogger, startGatewayServer } from "../helpers/agent.ts";
import { waitFor } from "../helpers/wait.ts";
import type { GatewayServer } from "../helpers/agent.ts";
import { api, startConductor } from "../helpers/conductor.ts";
import { RawAgent } from "../helpers/raw-agent.ts";
import { rawUpgrade, rawWebSocket, sendHugeFrame } from "../helpers/raw-upgrade.ts";

const NODE = { uuid: "55555555-5555-4555-8555-555555555555", macs: ["52:54:00:55:55:55"] };
const KiB = 1024;
const MiB = 1024 * KiB;

/** Paths a client might upgrade on: anything printable but the agent's own. */
const notTheAgentPath = fc
  .oneof(
    fc.webPath(),
    fc.constantFrom("/", "/v1", "/v1/agent/", "/v1/agentx", "/V1/AGENT", "/v1/events", "/boot/x", "*"),
    fc.stringMatching(/^\/[!-~]{0,300}$/),
  )
  .map((path) => (path.startsWith("/") || path === "*" ? path : `/${path}`))
  .filter((path) => path.split("?")[0] !== "/v1/agent");

describe("issue 11 class 2: every upgrade request gets an answer", () => {
  let ctx: Awaited<ReturnType<typeof startConductor>> | undefined;
  afterEach(async () => {
    await ctx?.stop();
    ctx = undefined;
  });

  it("upgrades to other paths get 404 in Ironic's envelope and their sockets are closed; the API still answers", async () => {
    ctx = await startConductor();
    const server = ctx.conductor.app.server;
    const port = Number(new URL(ctx.url).port);
    const connections = (): Promise<number> =>
      new Promise((resolve, reject) =>
        server.getConnections((error, count) => (error ? reject(error) : resolve(count))),
      );
    const baseline = await connections();
    let tried = 0;
    await fc.assert(
      fc.asyncProperty(notTheAgentPath, async (path) => {
        tried += 1;
        const answer = await rawUpgrade(port, path);
        expect(answer.endedByServer).toBe(true);
        expect([400, 404]).toContain(answer.status);
        if (answer.status === 404) {
          const fault = JSON.parse((JSON.parse(answer.body) as { error_message: string }).error_message);
          expect(fault).toMatchObject({ faultcode: "Client" });
        }
      }),
      { numRuns: 150 },
    );
    // a few hundred at once, as the attack did: none may linger
    const burst = fc.sample(notTheAgentPath, 300);
    const answers = await Promise.all(burst.map((path) => rawUpgrade(port, path)));
    tried += burst.length;
    expect(answers.every((answer) => answer.endedByServer && answer.status >= 400)).toBe(true);
    let now = -1;
    await waitFor(
      () => {
        void connections().then((count) => (now = count));
        return now === baseline;
      },
      { what: `server connections back to ${baseline}` },
    );
    expect((await api(`${ctx.url}/v1`)).status).toBe(200);
    console.log(`class 2: ${tried} upgrade requests on other paths, each answered and closed`);
  });
});

describe("issue 11 class 8: unauthenticated connections cost a bounded amount", () => {
  let gw: GatewayServer | undefined;
  afterEach(async () => {
    await gw?.gateway.close();
    await gw?.kill();
    gw = undefined;
  });

  it("40 sockets sending 8 MiB frames before hello are closed after reading about the budget", async () => {
    const budget = 64 * KiB;
    gw = await startGatewayServer({
      directory: new MemoryAgentDirectory(),
      logger: recordingLogger(),
      maxBytesBeforeHello: budget,
      maxConnectionsPerSource: 100,
    });
    const accepted: Socket[] = [];
    gw.server.on("connection", (socket: Socket) => accepted.push(socket));
    const sockets = await Promise.all(Array.from({ length: 40 }, () => rawWebSocket(gw!.port)));
    const replies = sockets.map((socket) => {
      const chunks: Buffer[] = [];
      socket.on("data", (chunk: Buffer) => chunks.push(chunk));
      return chunks;
    });
    const sent = await Promise.all(sockets.map((socket) => sendHugeFrame(socket, 8 * MiB)));
    await waitFor(() => sockets.every((socket) => socket.destroyed || socket.readableEnded), {
      what: "every attacker to be cut",
    });
    await waitFor(() => gw!.gateway.stats().connections === 0, { what: "the gateway to let go" });
    const read = accepted.map((socket) => socket.bytesRead);
    // the HTTP request, the budget and what one read burst brings past it (Node reads 64 KiB at a time,
    // a few reads per turn of the loop before the pause takes): a bound that does not grow with the frame
    const bound = budget + 4 * 64 * KiB;
    for (const bytes of read) expect(bytes).toBeLessThanOrEqual(bound);
    const total = read.reduce((a, b) => a + b, 0);
    expect(total).toBeLessThan(40 * bound);
    // each was told why: a FRAME_TOO_LARGE error frame (unmasked text frame from the server) and a close
    for (const chunks of replies) {
      const text = Buffer.concat(chunks).toString("latin1");
      expect(text).toContain("FRAME_TOO_LARGE");
    }
    console.log(
      `class 8: 40 sockets tried to send ${((40 * 8 * MiB) / MiB).toFixed(0)} MiB (wrote ${(sent.reduce((a, b) => a + b, 0) / MiB).toFixed(1)} MiB into their sockets); the gateway read ${(total / MiB).toFixed(2)} MiB`,
    );
  });

  it("refuses connections beyond the per-source and total caps at the upgrade, and gives slots back", async () => {
    gw = await startGatewayServer({
      directory: new MemoryAgentDirectory(),
      logger: recordingLogger(),
      maxConnections: 5,
      maxConnectionsPerSource: 3,
    });
    const held = await Promise.all([1, 2, 3].map(() => RawAgent.connect(gw!.url)));
    const over = await rawUpgrade(gw.port, "/v1/agent");
    expect(over.status).toBe(429);
    expect(over.endedByServer).toBe(true);
    held[0]?.socket.close();
    await held[0]?.closed();
    await waitFor(() => gw!.gateway.stats().connections === 2, { what: "a slot back" });
    const again = await RawAgent.connect(gw.url);
    expect(again.open).toBe(true);
    for (const agent of [...held, again]) agent.socket.terminate();
  });

  it("refuses beyond the total cap with 503", async () => {
    gw = await startGatewayServer({
      directory: new MemoryAgentDirectory(),
      logger: recordingLogger(),
      maxConnections: 2,
      maxConnectionsPerSource: 10,
    });
    const held = await Promise.all([1, 2].map(() => RawAgent.connect(gw!.url)));
    const over = await rawUpgrade(gw.port, "/v1/agent");
    expect(over.status).toBe(503);
    for (const agent of held) agent.socket.terminate();
  });

  it("closes a welcomed agent that floods frames faster than its rate", async () => {
    const directory = new MemoryAgentDirectory();
    directory.addNode(NODE);
    gw = await startGatewayServer({ directory, logger: recordingLogger(), maxFramesPerSecond: 5 });
    const agent = await RawAgent.connect(gw.url);
    agent.hello({ macs: NODE.macs });
    await agent.next("welcome");
    for (let i = 0; i < 200; i++) agent.send({ type: "heartbeat", ts: i });
    expect((await agent.next("error")).code).toBe("RATE_LIMITED");
    await agent.closed();
    await waitFor(() => !gw!.gateway.isConnected(NODE.uuid), { what: "the session to end" });
  });
});

/** Hostile frame shapes: random JSON, wrong types, unknown types, deep nesting, big strings. */
const knownTypes = fc.constantFrom(
  "hello",
  "welcome",
  "command",
  "progress",
  "result",
  "ack",
  "cancel",
  "heartbeat",
  "error",
);
const hostileText = (maxString: number): fc.Arbitrary<string> =>
  fc.oneof(
    fc.json({ maxDepth: 4 }),
    fc.string({ maxLength: 200 }),
    fc
      .record(
        {
          type: fc.oneof(knownTypes, fc.string({ maxLength: 20 })),
          v: fc.oneof(fc.constant(1), fc.anything()),
          id: fc.oneof(fc.string({ maxLength: 200 }), fc.anything()),
          macs: fc.oneof(fc.array(fc.string()), fc.anything()),
          boot_id: fc.anything(),
          token: fc.anything(),
          ok: fc.anything(),
          value: fc.anything(),
          error: fc.anything(),
          ts: fc.anything(),
          name: fc.anything(),
          args: fc.anything(),
        },
        { requiredKeys: ["type"] },
      )
      .map((frame) => JSON.stringify(frame)),
    fc.integer({ min: 1, max: 20_000 }).map((depth) => `${"[".repeat(depth)}${"]".repeat(depth)}`),
    fc
      .integer({ min: 1, max: 20_000 })
      .map((depth) => `{"type":"hello","v":1,"macs":${'{"a":'.repeat(depth)}1${"}".repeat(depth)}}`),
    fc
      .integer({ min: 0, max: maxString })
      .map((size) => JSON.stringify({ type: "heartbeat", v: 1, ts: 1, busy: "x".repeat(size) })),
  );

describe("fuzz: WebSocket frames before and after hello, against a conductor", () => {
  let ctx: Awaited<ReturnType<typeof startConductor>> | undefined;
  afterEach(async () => {
    await ctx?.stop();
    ctx = undefined;
  });

  it("never a crash: before hello an error frame and a close; after hello an answer and the session kept; the node unchanged", async () => {
    ctx = await startConductor({
      agent: { fastTrack: true, maxFramesPerSecond: 100_000, maxConnectionsPerSource: 1_000 },
    });
    const { url, conductor } = ctx;
    const wsUrl = `${url.replace(/^http/, "ws")}/v1/agent`;
    const created = await api(`${url}/v1/nodes`, {
      method: "POST",
      body: { name: "fuzzed", driver: "fake-hardware", deploy_interface: "direct" },
    });
    const uuid = (created.body as { uuid: string }).uuid;
    await api(`${url}/v1/ports`, { method: "POST", body: { node_uuid: uuid, address: NODE.macs[0] } });
    const nodeBefore = (await api(`${url}/v1/nodes/${uuid}`)).body;
    const live = await RawAgent.connect(wsUrl);
    live.hello({ macs: NODE.macs });
    await live.next("welcome");
    // a command in flight the whole time: no fuzzed frame may settle it
    const pending = conductor.gateway.call(uuid, { name: "get_clean_steps" });
    const command = await live.next("command");

    const preHelloCodes = new Set([
      "BAD_FRAME",
      "UNKNOWN_TYPE",
      "UNSUPPORTED_VERSION",
      "FRAME_TOO_LARGE",
      "HELLO_REQUIRED",
      "UNKNOWN_MAC",
    ]);
    let before = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          { weight: 9, arbitrary: hostileText(96 * KiB).map((text) => ({ text, binary: false as const })) },
          {
            weight: 1,
            arbitrary: fc.uint8Array({ maxLength: 512 }).map((bytes) => ({ bytes, binary: true as const })),
          },
        ),
        async (input) => {
          before += 1;
          const fake = await RawAgent.connect(wsUrl);
          if (input.binary) fake.socket.send(input.bytes, { binary: true });
          else fake.sendRaw(input.text);
          const error = await fake.next("error");
          expect(preHelloCodes).toContain(error.code);
          await fake.closed();
          expect(fake.frames.some((frame) => frame.type === "welcome")).toBe(false);
        },
      ),
      { numRuns: 250 },
    );

    let after = 0;
    const sessionCodes = new Set(["BAD_FRAME", "UNKNOWN_TYPE", "UNSUPPORTED_VERSION"]);
    await fc.assert(
      fc.asyncProperty(hostileText(256 * KiB), async (text) => {
        after += 1;
        live.frames.splice(0);
        live.sendRaw(text);
        live.send({ type: "heartbeat", ts: after }); // frames are handled in order: its answer ends the run
        await live.next("heartbeat");
        for (const frame of live.frames.filter((f) => f.type === "error"))
          expect(sessionCodes).toContain((frame as { code: string }).code);
        expect(live.open).toBe(true);
        expect(conductor.gateway.isConnected(uuid)).toBe(true);
      }),
      { numRuns: 400 },
    );

    live.send({ type: "result", id: command.id, ok: true, value: { clean_steps: [] } });
    await expect(pending).resolves.toEqual({ clean_steps: [] });
    const nodeAfter = (await api(`${url}/v1/nodes/${uuid}`)).body as Record<string, unknown>;
    expect(nodeAfter).toEqual(nodeBefore);
    const ports = (await api(`${url}/v1/ports?node=${uuid}`)).body as { ports: unknown[] };
    expect(ports.ports.length).toBe(1);
    expect((await api(`${url}/v1`)).status).toBe(200);
    console.log(`fuzz: ${before} hostile frames before hello, ${after} after hello; node unchanged`);
    live.socket.terminate();
  });
});
