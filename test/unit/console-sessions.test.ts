import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ConsoleSessions, defaultReopenDelayMs } from "../../conductor/console/sessions.ts";
import { Scrollback } from "../../conductor/console/scrollback.ts";
import type {
  ConsoleConnection,
  ConsoleInterface,
  ConsoleSink,
} from "../../conductor/drivers/console/console.ts";
import { FakeConsole } from "../../conductor/drivers/console/console.ts";
import type { DriverNode } from "../../conductor/drivers/interfaces.ts";
import { waitFor } from "../helpers/wait.ts";

const UUID = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123";
const NODE: DriverNode = {
  uuid: UUID,
  name: "node-1",
  driver_info: {},
  properties: {},
  instance_info: {},
  driver_internal_info: {},
  ports: [],
};

/** A console whose connections the test drives: it emits output and drops connections on demand. */
class ScriptedConsole implements ConsoleInterface {
  readonly name = "scripted";
  readonly sinks: ConsoleSink[] = [];
  readonly written: Buffer[] = [];
  closed = 0;
  failOpens = 0;

  validate(): void {}

  open(_node: DriverNode, sink: ConsoleSink): Promise<ConsoleConnection> {
    if (this.failOpens > 0) {
      this.failOpens--;
      return Promise.reject(new Error("BMC refused SOL"));
    }
    this.sinks.push(sink);
    return Promise.resolve({
      write: (chunk) => void this.written.push(chunk),
      close: () => {
        this.closed++;
        return Promise.resolve();
      },
    });
  }

  get sink(): ConsoleSink {
    return this.sinks[this.sinks.length - 1]!;
  }
}

function viewer() {
  const got: Buffer[] = [];
  const ended: string[] = [];
  return {
    got,
    ended,
    text: () => Buffer.concat(got).toString(),
    send: (chunk: Buffer) => void got.push(chunk),
    end: (reason: string) => void ended.push(reason),
  };
}

describe("Scrollback", () => {
  it("keeps exactly the newest bytes of whatever was appended, within its limit", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 300 }),
        fc.array(fc.uint8Array({ maxLength: 400 }), { maxLength: 30 }),
        (limit, chunks) => {
          const kept = new Scrollback(limit);
          for (const chunk of chunks) kept.append(Buffer.from(chunk));
          const all = Buffer.concat(chunks.map((c) => Buffer.from(c)));
          const expected = all.subarray(Math.max(0, all.length - limit));
          expect(kept.contents().equals(expected)).toBe(true);
          expect(kept.bytes).toBe(expected.length);
        },
      ),
    );
  });
});

describe("ConsoleSessions", () => {
  it("gives a new viewer the scrollback first, then live output, and sends its keystrokes", async () => {
    const scripted = new ScriptedConsole();
    const sessions = new ConsoleSessions({ scrollbackBytes: 8 });
    await sessions.start(UUID, scripted, NODE);
    scripted.sink.data(Buffer.from("0123456789"));
    const late = viewer();
    const attachment = sessions.attach(UUID, late)!;
    expect(late.text()).toBe("23456789");
    scripted.sink.data(Buffer.from("ab"));
    expect(late.text()).toBe("23456789ab");
    attachment.write(Buffer.from("root\r"));
    expect(Buffer.concat(scripted.written).toString()).toBe("root\r");
    attachment.detach();
    scripted.sink.data(Buffer.from("cd"));
    expect(late.text()).toBe("23456789ab");
  });

  it("reopens a connection that drops while enabled, and tells viewers", async () => {
    const scripted = new ScriptedConsole();
    const sessions = new ConsoleSessions({ reopenDelayMs: () => 0 });
    await sessions.start(UUID, scripted, NODE);
    const watching = viewer();
    sessions.attach(UUID, watching);
    scripted.failOpens = 1;
    scripted.sink.closed("ipmitool sol activate ended (exit 1)");
    await waitFor(() => scripted.sinks.length === 2);
    expect(watching.text()).toContain("console connection lost (ipmitool sol activate ended (exit 1))");
    expect(watching.text()).toContain("BMC refused SOL");
    scripted.sink.data(Buffer.from("back"));
    expect(watching.text().endsWith("back")).toBe(true);
  });

  it("stops: closes the connection, ends viewers, refuses new ones", async () => {
    const scripted = new ScriptedConsole();
    const sessions = new ConsoleSessions();
    await sessions.start(UUID, scripted, NODE);
    const watching = viewer();
    sessions.attach(UUID, watching);
    await sessions.stop(UUID);
    expect(scripted.closed).toBe(1);
    expect(watching.ended).toEqual(["console disabled"]);
    expect(sessions.has(UUID)).toBe(false);
    expect(sessions.attach(UUID, viewer())).toBeUndefined();
    // a late drop of the stopped connection opens nothing
    scripted.sink.closed("gone");
    expect(scripted.sinks.length).toBe(1);
  });

  it("admits at most maxViewers viewers per console", async () => {
    const sessions = new ConsoleSessions({ maxViewers: 2 });
    await sessions.start(UUID, new ScriptedConsole(), NODE);
    expect(sessions.attach(UUID, viewer())).toBeDefined();
    expect(sessions.attach(UUID, viewer())).toBeDefined();
    expect(sessions.attach(UUID, viewer())).toBeUndefined();
  });

  it("backs off up to 30 s between reopenings", () => {
    expect([0, 1, 2, 5, 9].map(defaultReopenDelayMs)).toEqual([1000, 2000, 4000, 30_000, 30_000]);
  });
});

describe("FakeConsole", () => {
  it("greets with a login prompt and echoes typed bytes, CR as CR LF", async () => {
    const sessions = new ConsoleSessions();
    await sessions.start(UUID, new FakeConsole(), NODE);
    const watching = viewer();
    const attachment = sessions.attach(UUID, watching)!;
    await waitFor(() => watching.text().includes("node-1 login: "));
    attachment.write(Buffer.from("root\r"));
    await waitFor(() => watching.text().endsWith("root\r\n"));
  });
});
