import { describe, expect, it } from "vitest";
import { CodedError } from "../../shared/errors.ts";
import { silentLogger } from "../../shared/log.ts";
import type { CommandFrame, OutgoingFrame } from "../../shared/protocol.ts";
import type { CommandTable } from "../../agent/commands/command.ts";
import { SimulatedBackend } from "../../agent/hardware/simulated/simulated-backend.ts";
import { CommandDispatcher } from "../../agent/link/dispatcher.ts";
import { sampleInventory } from "../helpers/agent.ts";

const IPA_INVENTORY = sampleInventory();

type Sent = Extract<OutgoingFrame, { type: "result" | "progress" }>;

/** A dispatcher whose sync command waits until the test releases it (or cancels it). */
function setup(options: { connected?: boolean } = {}) {
  const sent: Sent[] = [];
  let connected = options.connected ?? true;
  const releases: Array<() => void> = [];
  const backend = new SimulatedBackend({ inventory: IPA_INVENTORY });
  const commands: CommandTable = {
    get_inventory: (_args, { backend: hw }) => hw.inventory(),
    sync: (_args, { signal, progress }) =>
      new Promise((resolve, reject) => {
        progress({ step: "flushing", bytes_done: 1 });
        releases.push(() => resolve({ flushed: true }));
        signal.addEventListener("abort", () => reject(signal.reason));
      }),
    reboot: async (_args, { afterResult, backend: hw }) => {
      afterResult(() => hw.reboot());
      return {};
    },
  };
  const dispatcher = new CommandDispatcher({
    backend,
    commands,
    logger: silentLogger,
    send: (frame) => {
      if (!connected) return false;
      sent.push(frame as Sent);
      return true;
    },
    ackGraceMs: 60_000,
  });
  return {
    dispatcher,
    backend,
    sent,
    release: () => releases.shift()?.(),
    setConnected: (value: boolean) => {
      connected = value;
    },
  };
}

const command = (id: string, name: CommandFrame["name"], args: unknown = {}): CommandFrame => ({
  type: "command",
  v: 1,
  id,
  name,
  args,
});
const tick = () => new Promise((resolve) => setImmediate(resolve));
const results = (sent: Sent[]) => sent.filter((frame) => frame.type === "result");

describe("CommandDispatcher", () => {
  it("answers BUSY to a second mutating command and runs read-only ones alongside", async () => {
    const { dispatcher, sent, release } = setup();
    dispatcher.handleCommand(command("a", "sync"));
    dispatcher.handleCommand(command("b", "sync"));
    dispatcher.handleCommand(command("c", "get_inventory"));
    await tick();
    expect(dispatcher.busy).toBe("a");
    expect(results(sent)).toEqual([
      expect.objectContaining({
        id: "b",
        ok: false,
        error: expect.objectContaining({ code: "BUSY", retryable: true }),
      }),
      expect.objectContaining({ id: "c", ok: true, value: IPA_INVENTORY }),
    ]);
    release();
    await tick();
    expect(results(sent).at(-1)).toMatchObject({ id: "a", ok: true, value: { flushed: true } });
    expect(dispatcher.busy).toBeUndefined();
  });

  it("sends progress frames tagged with the command id", async () => {
    const { dispatcher, sent } = setup();
    dispatcher.handleCommand(command("p", "sync"));
    await tick();
    expect(sent[0]).toEqual({ type: "progress", id: "p", step: "flushing", bytes_done: 1 });
  });

  it("cancels through the AbortSignal and reports CANCELLED", async () => {
    const { dispatcher, sent } = setup();
    dispatcher.handleCommand(command("x", "sync"));
    dispatcher.handleCancel("x");
    await tick();
    expect(results(sent)).toEqual([
      expect.objectContaining({ id: "x", ok: false, error: expect.objectContaining({ code: "CANCELLED" }) }),
    ]);
    expect(dispatcher.busy).toBeUndefined();
  });

  it("answers BAD_ARGS and NOT_SUPPORTED without running anything", async () => {
    const { dispatcher, sent } = setup();
    dispatcher.handleCommand(command("bad", "sync", { force: 1 }));
    dispatcher.handleCommand(
      command("ns", "create_raid", { logical_disks: [{ size_gb: 10, raid_level: "1" }] }),
    );
    await tick();
    expect(results(sent).map((frame) => (frame.ok ? "ok" : frame.error.code))).toEqual([
      "BAD_ARGS",
      "NOT_SUPPORTED",
    ]);
    expect(dispatcher.busy).toBeUndefined();
  });

  it("keeps a result produced while disconnected and re-sends it until acknowledged", async () => {
    const { dispatcher, sent, release, setConnected } = setup();
    dispatcher.handleCommand(command("k", "sync"));
    setConnected(false);
    release();
    await tick();
    expect(results(sent)).toEqual([]);
    expect(dispatcher.pendingResults).toBe(1);
    setConnected(true);
    dispatcher.resendUnacked();
    expect(results(sent)).toEqual([expect.objectContaining({ id: "k", ok: true })]);
    dispatcher.handleAck("k");
    dispatcher.resendUnacked();
    expect(results(sent)).toHaveLength(1);
    expect(dispatcher.pendingResults).toBe(0);
  });

  it("does not run a command twice when the conductor re-sends it", async () => {
    const { dispatcher, sent, release } = setup();
    dispatcher.handleCommand(command("d", "sync"));
    dispatcher.handleCommand(command("d", "sync")); // re-sent while running: ignored
    release();
    await tick();
    dispatcher.handleCommand(command("d", "sync")); // re-sent before the ack: the kept result again
    expect(results(sent).map((frame) => frame.id)).toEqual(["d", "d"]);
    dispatcher.handleAck("d");
    dispatcher.handleCommand(command("d", "sync")); // after the ack: answered from the kept result, not run
    await tick();
    expect(results(sent).map((frame) => frame.id)).toEqual(["d", "d", "d"]);
    expect(results(sent)[2]).toEqual(results(sent)[0]);
    expect(dispatcher.busy).toBeUndefined();
    expect(dispatcher.pendingResults).toBe(0); // a kept result is not waiting for another ack
  });

  it("answers a command asked again after its ack (a new owner re-attaching) with the result, never a second run", async () => {
    const { dispatcher, sent } = setup();
    // read-only commands finish at once: 20 of them, then the last and the first asked again
    for (let i = 0; i < 20; i++) dispatcher.handleCommand(command(`i${i}`, "get_inventory"));
    await tick();
    for (let i = 0; i < 20; i++) dispatcher.handleAck(`i${i}`);
    const before = results(sent).length;
    dispatcher.handleCommand(command("i19", "get_inventory")); // recent: its result again
    dispatcher.handleCommand(command("i0", "get_inventory")); // beyond the kept results: ignored, not run
    await tick();
    // a run of i0 would have sent a result for it
    const after = results(sent).slice(before);
    expect(after.map((frame) => frame.id)).toEqual(["i19"]);
    expect(after[0]).toEqual(results(sent).find((frame) => frame.id === "i19"));
  });

  it("runs after-result actions (reboot) only once the result is acknowledged", async () => {
    const { dispatcher, backend } = setup();
    dispatcher.handleCommand(command("r", "reboot"));
    await tick();
    expect(backend.events).toEqual([]);
    dispatcher.handleAck("r");
    await tick();
    expect(backend.events).toEqual(["reboot"]);
  });

  it("normalises thrown errors into wire errors", async () => {
    const { sent } = setup();
    const dispatcher = new CommandDispatcher({
      backend: new SimulatedBackend({ inventory: IPA_INVENTORY }),
      commands: {
        sync: async () => {
          throw new CodedError("NO_ROOT_DEVICE", "no disk of 4 GiB");
        },
        power_off: async () => {
          throw new TypeError("boom");
        },
      },
      logger: silentLogger,
      send: (frame) => sent.push(frame as Sent) > 0,
    });
    dispatcher.handleCommand(command("e1", "sync"));
    await tick();
    dispatcher.handleCommand(command("e2", "power_off"));
    await tick();
    expect(results(sent).map((frame) => (frame.ok ? null : frame.error))).toEqual([
      { code: "NO_ROOT_DEVICE", message: "no disk of 4 GiB", retryable: false },
      { code: "COMMAND_FAILED", message: "boom", retryable: false },
    ]);
  });
});

describe("CommandDispatcher argument checking", () => {
  it("checks arguments once, from the catalogue: hostile ones get BAD_ARGS naming the field, the handler never runs", async () => {
    const seen: unknown[] = [];
    const sent: Sent[] = [];
    const dispatcher = new CommandDispatcher({
      backend: new SimulatedBackend({ inventory: IPA_INVENTORY }),
      commands: { smart_check: async (args) => (seen.push(args), { devices: [] }) },
      logger: silentLogger,
      send: (frame) => (sent.push(frame as Sent), true),
    });
    const hostile: unknown[] = [
      { devices: "/dev/sda" },
      { devices: ["/dev/sda"], extra: true },
      { devices: [""] },
      { devices: Array.from({ length: 300 }, (_, i) => `/dev/sd${i}`) },
      JSON.parse('{"__proto__": {"polluted": true}, "devices": []}'),
      "rm -rf /",
      42,
    ];
    for (const [index, args] of hostile.entries()) {
      dispatcher.handleCommand(command(`h${index}`, "smart_check", args));
    }
    dispatcher.handleCommand(command("ok", "smart_check", { devices: ["/dev/sda"] }));
    await tick();
    const answers = results(sent);
    expect(answers.slice(0, hostile.length)).toEqual(
      hostile.map(() =>
        expect.objectContaining({
          ok: false,
          error: expect.objectContaining({
            code: "BAD_ARGS",
            message: expect.stringMatching(/^smart_check: /) as unknown,
          }),
        }),
      ),
    );
    expect(answers.at(-1)).toMatchObject({ id: "ok", ok: true });
    // the handler saw only the valid arguments, already parsed
    expect(seen).toEqual([{ devices: ["/dev/sda"] }]);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});
