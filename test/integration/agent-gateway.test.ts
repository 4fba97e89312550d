import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AgentCommandError } from "../../conductor/agents/command-error.ts";
import { MemoryAgentDirectory } from "../../conductor/agents/memory-directory.ts";
import { encodeFrame } from "../../shared/protocol.ts";
import { recordingLogger, startGatewayServer } from "../helpers/agent.ts";
import { waitFor } from "../helpers/wait.ts";
import type { GatewayServer } from "../helpers/agent.ts";
import { RawAgent } from "../helpers/raw-agent.ts";

const MAX_FRAME = 16 * 1024;
const NODE_A = { uuid: "11111111-1111-4111-8111-111111111111", macs: ["52:54:00:00:00:0a"] };
const NODE_B = { uuid: "22222222-2222-4222-8222-222222222222", macs: ["52:54:00:00:00:0b"] };

describe("agent gateway liveness", () => {
  it("drops a session that stops heartbeating, and a connection that never says hello", async () => {
    const directory = new MemoryAgentDirectory();
    directory.addNode(NODE_A);
    const gw = await startGatewayServer({
      directory,
      logger: recordingLogger(),
      heartbeatTimeoutMs: 400,
      helloTimeoutMs: 400,
    });
    try {
      const silent = await RawAgent.connect(gw.url);
      silent.hello({ macs: NODE_A.macs });
      const welcome = await silent.next("welcome");
      expect(welcome.heartbeat_interval_ms).toBeLessThan(400);
      const mute = await RawAgent.connect(gw.url);
      await silent.closed();
      await mute.closed();
      expect(gw.gateway.isConnected(NODE_A.uuid)).toBe(false);
    } finally {
      await gw.gateway.close();
      await gw.kill();
    }
  });
});

describe("agent gateway over a real WebSocket", () => {
  let directory: MemoryAgentDirectory;
  let logger: ReturnType<typeof recordingLogger>;
  let gw: GatewayServer;
  const agents: RawAgent[] = [];
  const connect = async (): Promise<RawAgent> => {
    const agent = await RawAgent.connect(gw.url);
    agents.push(agent);
    return agent;
  };
  /** Connects and completes a handshake; returns the agent and its token. */
  const admitted = async (node: { macs: string[] }, bootId = "boot-1") => {
    const agent = await connect();
    agent.hello({ macs: node.macs, bootId });
    const welcome = await agent.next("welcome");
    return { agent, welcome, token: welcome.token as string };
  };

  beforeEach(async () => {
    directory = new MemoryAgentDirectory();
    directory.addNode(NODE_A);
    directory.addNode(NODE_B);
    logger = recordingLogger();
    gw = await startGatewayServer({
      directory,
      logger,
      maxFrameBytes: MAX_FRAME,
      heartbeatTimeoutMs: 30_000,
    });
  });

  afterEach(async () => {
    for (const agent of agents.splice(0)) agent.socket.terminate();
    await gw.gateway.close();
    await gw.kill();
  });

  describe("refusals before the handshake: an error frame, a close, and no directory change", () => {
    it.each([
      ["a malformed frame", "{this is not json", "BAD_FRAME"],
      ["an unknown frame type", JSON.stringify({ type: "teleport", v: 1 }), "UNKNOWN_TYPE"],
      ["another protocol version", JSON.stringify({ type: "hello", v: 7 }), "UNSUPPORTED_VERSION"],
      [
        "an oversized frame",
        JSON.stringify({ type: "hello", v: 1, pad: "x".repeat(MAX_FRAME) }),
        "FRAME_TOO_LARGE",
      ],
      ["a heartbeat before hello", encodeFrame({ type: "heartbeat", ts: 1 }), "HELLO_REQUIRED"],
    ])("%s", async (_label, text, code) => {
      const agent = await connect();
      agent.sendRaw(text);
      expect((await agent.next("error")).code).toBe(code);
      expect(await agent.closed()).toBe(code === "FRAME_TOO_LARGE" ? 1009 : 1008);
      expect(directory.saveCount).toBe(0);
    });

    it("an unknown MAC", async () => {
      const agent = await connect();
      agent.hello({ macs: ["52:54:00:ff:ff:ff"] });
      expect((await agent.next("error")).code).toBe("UNKNOWN_MAC");
      expect(await agent.closed()).toBe(1008);
      expect(directory.saveCount).toBe(0);
      expect(gw.gateway.isConnected(NODE_A.uuid)).toBe(false);
    });
  });

  describe("tokens", () => {
    it("issues a token on the first hello of a boot and stores only its digest", async () => {
      const { welcome, token } = await admitted(NODE_A);
      expect(welcome.node_uuid).toBe(NODE_A.uuid);
      expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
      const record = directory.tokens.get(NODE_A.uuid);
      expect(record?.bootId).toBe("boot-1");
      expect(record?.digest).toMatch(/^[0-9a-f]{64}$/);
      expect(JSON.stringify(record)).not.toContain(token);
      expect(gw.gateway.isConnected(NODE_A.uuid)).toBe(true);
    });

    it("accepts the token on a later hello of the same boot and issues no new one", async () => {
      const first = await admitted(NODE_A);
      first.agent.socket.close();
      await first.agent.closed();
      const again = await connect();
      again.hello({ macs: NODE_A.macs, token: first.token });
      const welcome = await again.next("welcome");
      expect(welcome.token).toBeUndefined();
      expect(directory.saveCount).toBe(1);
    });

    it("refuses a hello without the token once one was issued for this boot", async () => {
      await admitted(NODE_A);
      const before = structuredClone(directory.tokens);
      const agent = await connect();
      agent.hello({ macs: NODE_A.macs });
      expect((await agent.next("error")).code).toBe("TOKEN_REQUIRED");
      expect(await agent.closed()).toBe(1008);
      expect(directory.tokens).toEqual(before);
      expect(directory.saveCount).toBe(1);
    });

    it("refuses a wrong token", async () => {
      await admitted(NODE_A);
      const before = structuredClone(directory.tokens);
      const agent = await connect();
      agent.hello({ macs: NODE_A.macs, token: "A".repeat(43) });
      expect((await agent.next("error")).code).toBe("BAD_TOKEN");
      expect(await agent.closed()).toBe(1008);
      expect(directory.tokens).toEqual(before);
    });

    it("refuses another node's token", async () => {
      await admitted(NODE_A);
      const b = await admitted(NODE_B);
      const before = structuredClone(directory.tokens);
      const agent = await connect();
      agent.hello({ macs: NODE_A.macs, token: b.token });
      expect((await agent.next("error")).code).toBe("BAD_TOKEN");
      expect(await agent.closed()).toBe(1008);
      expect(directory.tokens).toEqual(before);
      expect(directory.saveCount).toBe(2);
    });

    it("a new boot id earns nothing while the token exists: refused, the live session untouched", async () => {
      const live = await admitted(NODE_A, "boot-1");
      const before = structuredClone(directory.tokens);
      const impostor = await connect();
      impostor.hello({ macs: NODE_A.macs, bootId: "boot-2" });
      expect((await impostor.next("error")).code).toBe("TOKEN_REQUIRED");
      expect(await impostor.closed()).toBe(1008);
      expect(directory.tokens).toEqual(before);
      expect(live.agent.open).toBe(true);
      expect(live.agent.frames.filter((frame) => frame.type === "error")).toEqual([]);
      expect(gw.gateway.isConnected(NODE_A.uuid)).toBe(true);
    });

    it("issues a fresh token once the conductor cleared the old one (it booted the node again)", async () => {
      const first = await admitted(NODE_A, "boot-1");
      first.agent.socket.close();
      await first.agent.closed();
      directory.clearToken(NODE_A.uuid);
      const stale = await connect();
      stale.hello({ macs: NODE_A.macs, bootId: "boot-1", token: first.token });
      expect((await stale.next("error")).code).toBe("BAD_TOKEN");
      // the old boot's agent, told its token is void, dials without one: still not its token to take
      const old = await connect();
      old.hello({ macs: NODE_A.macs, bootId: "boot-1" });
      expect((await old.next("error")).code).toBe("TOKEN_REQUIRED");
      expect(directory.saveCount).toBe(1);
      const second = await admitted(NODE_A, "boot-2");
      expect(second.token).not.toBe(first.token);
      expect(directory.tokens.get(NODE_A.uuid)?.bootId).toBe("boot-2");
    });

    it("the token alone admits, whatever boot id comes with it", async () => {
      const first = await admitted(NODE_A, "boot-1");
      const again = await connect();
      again.hello({ macs: NODE_A.macs, bootId: "boot-9", token: first.token });
      expect((await again.next("welcome")).token).toBeUndefined();
      expect(directory.saveCount).toBe(1);
    });

    it("two racing first hellos of one boot: exactly one gets a token", async () => {
      // A directory slow enough that both reads happen before either write, without the gateway's lock.
      const slow = directory as MemoryAgentDirectory & { tokenRecord: MemoryAgentDirectory["tokenRecord"] };
      const read = slow.tokenRecord.bind(slow);
      slow.tokenRecord = async (uuid) => {
        const record = await read(uuid); // read now, answer later: both readers see "no token yet"
        await new Promise((done) => setTimeout(done, 50));
        return record;
      };
      const [one, two] = [await connect(), await connect()];
      one.hello({ macs: NODE_A.macs });
      two.hello({ macs: NODE_A.macs });
      await waitFor(() => one.frames.length + two.frames.length >= 2, { what: "both answers" });
      const answers = [...one.frames, ...two.frames]
        .map((frame) => (frame.type === "error" ? frame.code : frame.type))
        .sort();
      expect(answers).toEqual(["TOKEN_REQUIRED", "welcome"]);
      expect(directory.saveCount).toBe(1);
    });

    it("never writes a token to the log", async () => {
      const a = await admitted(NODE_A);
      const b = await admitted(NODE_B);
      const intruder = await connect();
      intruder.hello({ macs: NODE_A.macs, token: b.token });
      await intruder.closed();
      expect(logger.lines.length).toBeGreaterThan(0);
      for (const line of logger.lines) {
        expect(line).not.toContain(a.token);
        expect(line).not.toContain(b.token);
      }
    });
  });

  describe("a live session", () => {
    it("answers a bad frame with an error but keeps the session", async () => {
      const { agent } = await admitted(NODE_A);
      agent.sendRaw("{garbage");
      expect((await agent.next("error")).code).toBe("BAD_FRAME");
      agent.sendRaw(JSON.stringify({ type: "from-the-future", v: 1 }));
      expect((await agent.next("error")).code).toBe("UNKNOWN_TYPE");
      agent.send({ type: "heartbeat", ts: 1 });
      await agent.next("heartbeat");
      expect(agent.open).toBe(true);
      expect(gw.gateway.isConnected(NODE_A.uuid)).toBe(true);
    });

    it("closes a session that sends a binary frame", async () => {
      const { agent } = await admitted(NODE_A);
      agent.socket.send(Buffer.from([0, 1, 2, 255]), { binary: true });
      expect((await agent.next("error")).code).toBe("BAD_FRAME");
      expect(await agent.closed()).toBe(1008);
      await waitFor(() => !gw.gateway.isConnected(NODE_A.uuid), { what: "disconnect" });
    });

    it("closes a session that sends an oversized frame", async () => {
      const { agent } = await admitted(NODE_A);
      agent.sendRaw(encodeFrame({ type: "heartbeat", ts: 1, busy: "x".repeat(MAX_FRAME) }));
      expect((await agent.next("error")).code).toBe("FRAME_TOO_LARGE");
      expect(await agent.closed()).toBe(1009);
      await waitFor(() => !gw.gateway.isConnected(NODE_A.uuid), { what: "disconnect" });
    });

    it("a newer connection for the node replaces the older one", async () => {
      const first = await admitted(NODE_A);
      const second = await connect();
      second.hello({ macs: NODE_A.macs, token: first.token });
      await second.next("welcome");
      expect((await first.agent.next("error")).code).toBe("REPLACED");
      await first.agent.closed();
      expect(gw.gateway.isConnected(NODE_A.uuid)).toBe(true);
    });
  });

  describe("call()", () => {
    it("sends the command, relays progress, resolves with the value and acks the result", async () => {
      const { agent } = await admitted(NODE_A);
      const progress: unknown[] = [];
      const pending = gw.gateway.call(NODE_A.uuid, { name: "sync" }, { onProgress: (p) => progress.push(p) });
      const command = await agent.next("command");
      expect(command).toMatchObject({ name: "sync", args: {} });
      agent.send({ type: "progress", id: command.id, step: "flush", bytes_done: 5, bytes_total: 10 });
      agent.send({ type: "result", id: command.id, ok: true, value: { done: true } });
      await expect(pending).resolves.toEqual({ done: true });
      expect(progress).toEqual([{ step: "flush", bytes_done: 5, bytes_total: 10 }]);
      expect((await agent.next("ack")).id).toBe(command.id);
    });

    it("rejects with the agent's typed error", async () => {
      const { agent } = await admitted(NODE_A);
      const pending = gw.gateway.call(NODE_A.uuid, { name: "reboot" });
      const command = await agent.next("command");
      agent.send({
        type: "result",
        id: command.id,
        ok: false,
        error: { code: "BUSY", message: "erasing", retryable: true },
      });
      const error = await pending.catch((e: unknown) => e);
      expect(error).toBeInstanceOf(AgentCommandError);
      expect(error).toMatchObject({ code: "BUSY", retryable: true, message: "erasing" });
    });

    it("rejects at once for a node without an agent, or bad arguments", async () => {
      await expect(gw.gateway.call(NODE_B.uuid, { name: "sync" })).rejects.toMatchObject({
        code: "NOT_CONNECTED",
        retryable: true,
      });
      await admitted(NODE_A);
      await expect(
        gw.gateway.call(NODE_A.uuid, { name: "set_boot", args: { device: "floppy" } }),
      ).rejects.toMatchObject({
        code: "BAD_ARGS",
      });
    });

    it("times out and cancels the command on the agent", async () => {
      const { agent } = await admitted(NODE_A);
      const pending = gw.gateway.call(NODE_A.uuid, { name: "sync" }, { timeoutMs: 200 });
      const command = await agent.next("command");
      await expect(pending).rejects.toMatchObject({ code: "TIMEOUT" });
      expect((await agent.next("cancel")).id).toBe(command.id);
    });

    it("cancels through an AbortSignal", async () => {
      const { agent } = await admitted(NODE_A);
      const controller = new AbortController();
      const pending = gw.gateway.call(NODE_A.uuid, { name: "sync" }, { signal: controller.signal });
      const command = await agent.next("command");
      controller.abort();
      await expect(pending).rejects.toMatchObject({ code: "CANCELLED" });
      expect((await agent.next("cancel")).id).toBe(command.id);
    });

    it("a result that arrives over a new connection resolves the call", async () => {
      const first = await admitted(NODE_A);
      const pending = gw.gateway.call(NODE_A.uuid, { name: "sync" });
      const command = await first.agent.next("command");
      first.agent.socket.terminate();
      await waitFor(() => !gw.gateway.isConnected(NODE_A.uuid), { what: "disconnect" });
      const again = await connect();
      again.hello({ macs: NODE_A.macs, token: first.token });
      await again.next("welcome");
      expect((await again.next("command")).id).toBe(command.id); // re-sent in case the first copy was lost
      again.send({ type: "result", id: command.id, ok: true, value: "late" });
      await expect(pending).resolves.toBe("late");
    });

    it("a result that came before anyone asked (a new owner) settles a later call with that id, for its node only", async () => {
      const { agent } = await admitted(NODE_A);
      // re-sent after the welcome: finished for a conductor that died, unknown here
      agent.send({ type: "result", id: "cmd-written", ok: true, value: { written: 42 } });
      agent.send({
        type: "result",
        id: "cmd-failed",
        ok: false,
        error: { code: "COMMAND_FAILED", message: "checksum mismatch", retryable: false },
      });
      expect((await agent.next("ack")).id).toBe("cmd-written"); // acked: the agent may forget it
      expect((await agent.next("ack")).id).toBe("cmd-failed");

      // another node cannot claim it, and a call without the id never gets it
      await expect(
        gw.gateway.call(NODE_B.uuid, { name: "sync" }, { id: "cmd-written" }),
      ).rejects.toMatchObject({ code: "NOT_CONNECTED" });
      await expect(gw.gateway.call(NODE_A.uuid, { name: "sync" }, { id: "cmd-written" })).resolves.toEqual({
        written: 42,
      });
      await expect(
        gw.gateway.call(NODE_A.uuid, { name: "sync" }, { id: "cmd-failed" }),
      ).rejects.toMatchObject({ code: "COMMAND_FAILED", message: "checksum mismatch", retryable: false });
      expect(agent.frames.filter((f) => f.type === "command")).toEqual([]); // nothing was sent to run again

      // claimed once: asking again sends the command (the agent answers from its own memory)
      const again = gw.gateway.call(NODE_A.uuid, { name: "sync" }, { id: "cmd-written" });
      const command = await agent.next("command");
      expect(command.id).toBe("cmd-written");
      agent.send({ type: "result", id: command.id, ok: true, value: "again" });
      await expect(again).resolves.toBe("again");
    });

    it("close() fails pending calls with GATEWAY_CLOSED and closes agents", async () => {
      const { agent } = await admitted(NODE_A);
      const pending = gw.gateway.call(NODE_A.uuid, { name: "sync" }).catch((error: unknown) => error);
      await agent.next("command");
      await gw.gateway.close();
      expect(await pending).toMatchObject({ code: "GATEWAY_CLOSED", retryable: true });
      expect(await agent.closed()).toBe(1001);
    });

    it("reports connects and disconnects", async () => {
      const events: string[] = [];
      gw.gateway.onConnected((uuid, hello) => events.push(`up ${uuid} ${hello.agent_version}`));
      gw.gateway.onDisconnected((uuid) => events.push(`down ${uuid}`));
      const { agent } = await admitted(NODE_A);
      agent.socket.close();
      await waitFor(() => events.length === 2, { what: "events" });
      expect(events).toEqual([`up ${NODE_A.uuid} test`, `down ${NODE_A.uuid}`]);
    });
  });
});
