import { execFileSync } from "node:child_process";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { burninNetwork } from "../../agent/commands/burnin-network.ts";
import { LinuxBurninTools } from "../../agent/hardware/burnin-tools.ts";
import { SimulatedBackend } from "../../agent/hardware/simulated/simulated-backend.ts";
import { simulatedInventory } from "../../agent/hardware/simulated/sample-inventory.ts";
import { NetworkBurninPairing } from "../../conductor/drivers/deploy/burnin-pairing.ts";
import { burninRun } from "../../conductor/drivers/deploy/burnin.ts";
import type { AgentControl } from "../../conductor/drivers/agent-control.ts";
import type { DriverTask, TaskDeps } from "../../conductor/drivers/task-context.ts";
import { BURNIN_PAIRING_GROUP, BurninNetworkArgs, burninPairingSettings } from "../../shared/burnin.ts";
import type { FioJobResult } from "../../shared/burnin.ts";
import { silentLogger } from "../../shared/log.ts";
import { freeLoopbackPort } from "../helpers/free-port.ts";

const A = { node: "aaaaaaaa-0000-4000-8000-000000000001", address: "192.0.2.1" };
const B = { node: "bbbbbbbb-0000-4000-8000-000000000002", address: "192.0.2.2" };
const C = { node: "cccccccc-0000-4000-8000-000000000003", address: "192.0.2.3" };

describe("NetworkBurninPairing: the conductor pairs burnin_network nodes two by two", () => {
  it("makes the first of a pair the writer and the second the reader, each told the other's address", async () => {
    const pairing = new NetworkBurninPairing();
    const first = pairing.join("g", A, { timeoutMs: 60_000 });
    expect(pairing.waitingGroups()).toEqual(["g"]);
    const second = await pairing.join("g", B, { timeoutMs: 60_000 });
    expect(second).toEqual({ group: "g", role: "reader", partner: A.address, partner_node: A.node });
    expect(await first).toEqual({ group: "g", role: "writer", partner: B.address, partner_node: B.node });
    expect(pairing.waitingGroups()).toEqual([]);
  });

  it("pairs only within a group, and a third node waits for a fourth", async () => {
    const pairing = new NetworkBurninPairing();
    const a = pairing.join("rack-1", A, { timeoutMs: 60_000 });
    const c = pairing.join("rack-2", C, { timeoutMs: 60_000 });
    expect((await pairing.join("rack-1", B, { timeoutMs: 60_000 })).partner_node).toBe(A.node);
    expect((await a).partner_node).toBe(B.node);
    expect(pairing.waitingGroups()).toEqual(["rack-2"]);
    const d = await pairing.join("rack-2", { node: "d", address: "192.0.2.4" }, { timeoutMs: 60_000 });
    expect(d).toMatchObject({ role: "reader", partner: C.address });
    expect(await c).toMatchObject({ role: "writer", partner: "192.0.2.4" });
  });

  it("fails clearly when no partner comes in time, and forgets the waiting node", async () => {
    const pairing = new NetworkBurninPairing();
    await expect(pairing.join("lonely", A, { timeoutMs: 20 })).rejects.toThrow(
      /^burnin_network: no partner joined pairing group 'lonely' within 0 s \(agent_burnin_fio_network_pairing_timeout\)/,
    );
    expect(pairing.waitingGroups()).toEqual([]);
  });

  it("never pairs a node with itself: asking again replaces its earlier wait", async () => {
    const pairing = new NetworkBurninPairing();
    const earlier = pairing.join("g", A, { timeoutMs: 60_000 });
    const again = pairing.join("g", A, { timeoutMs: 60_000 });
    await expect(earlier).rejects.toThrow(/asked again for a partner/);
    expect((await pairing.join("g", B, { timeoutMs: 60_000 })).partner_node).toBe(A.node);
    expect((await again).partner_node).toBe(B.node);
  });

  it("stops waiting when the step is aborted", async () => {
    const pairing = new NetworkBurninPairing();
    const abort = new AbortController();
    const waiting = pairing.join("g", A, { timeoutMs: 60_000, signal: abort.signal });
    abort.abort(new Error("clean aborted"));
    await expect(waiting).rejects.toThrow("clean aborted");
    expect(pairing.waitingGroups()).toEqual([]);
  });
});

describe("burninPairingSettings: IPA's agent_burnin_fio_network_pairing_* knobs", () => {
  it("takes IPA's defaults, numbers given as strings, and names a bad knob by its key", () => {
    expect(burninPairingSettings({})).toEqual({
      ok: true,
      settings: { timeout: 900, group_name: BURNIN_PAIRING_GROUP },
    });
    expect(
      burninPairingSettings({
        agent_burnin_fio_network_pairing_timeout: "120",
        agent_burnin_fio_network_pairing_group_name: "rack-7",
        agent_burnin_fio_network_pairing_backend_url: "etcd3+http://192.0.2.1:2379",
      }),
    ).toEqual({
      ok: true,
      settings: { timeout: 120, group_name: "rack-7", backend_url: "etcd3+http://192.0.2.1:2379" },
    });
    const bad = burninPairingSettings({
      agent_burnin_fio_network_pairing_timeout: "soon",
      agent_burnin_fio_network_pairing_group_name: "two words",
    });
    expect(bad.ok).toBe(false);
    expect(bad.ok ? [] : bad.problems).toEqual([
      expect.stringMatching(/^agent_burnin_fio_network_pairing_timeout: /),
      expect.stringMatching(/^agent_burnin_fio_network_pairing_group_name: /),
    ]);
  });

  it("never throws on any driver_info, and what it accepts is within bounds", () => {
    const value = fc.oneof(
      fc.string(),
      fc.integer(),
      fc.double(),
      fc.constant(null),
      fc.boolean(),
      fc.array(fc.string(), { maxLength: 2 }),
    );
    const key = fc.constantFrom(
      "agent_burnin_fio_network_pairing_timeout",
      "agent_burnin_fio_network_pairing_group_name",
      "agent_burnin_fio_network_pairing_backend_url",
      "unrelated",
    );
    fc.assert(
      fc.property(fc.dictionary(key, value), (info) => {
        const result = burninPairingSettings(info);
        if (result.ok) {
          expect(Number.isInteger(result.settings.timeout)).toBe(true);
          expect(result.settings.timeout).toBeGreaterThanOrEqual(1);
          expect(result.settings.timeout).toBeLessThanOrEqual(86_400);
          expect(result.settings.group_name).toMatch(/^[\x21-\x7e]{1,255}$/);
        } else {
          expect(result.problems.length).toBeGreaterThan(0);
        }
      }),
    );
  });
});

/** Real fio when it is installed (the tests' machines have it: scripts/setup/system-deps.sh). */
function hasFio(): boolean {
  try {
    execFileSync("fio", ["--version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}
const REAL_FIO = hasFio();

/**
 * Two agents on loopback behind one AgentControl: each command runs the agent's burnin_network handler, on a
 * simulated machine whose fio is the host's real one when installed. Both dialled from 127.0.0.1.
 */
function loopbackAgents(): AgentControl & { commands: { node: string; args: unknown }[] } {
  const commands: { node: string; args: unknown }[] = [];
  return {
    commands,
    isConnected: () => true,
    addressOf: () => "127.0.0.1",
    async call(node, command, options) {
      commands.push({ node, args: command.args });
      const backend = new SimulatedBackend({
        inventory: simulatedInventory({ macs: ["52:54:00:aa:bb:09"], disks: [] }),
      });
      if (REAL_FIO) Object.defineProperty(backend, "burnin", { value: new LinuxBurninTools() });
      return burninNetwork(BurninNetworkArgs.parse(command.args), {
        backend,
        signal: options?.signal ?? new AbortController().signal,
        logger: silentLogger,
        progress: () => undefined,
        afterResult: () => undefined,
      });
    },
  };
}

function task(uuid: string, deps: TaskDeps, driverInfo: Record<string, unknown>) {
  const internal: Record<string, unknown> = {};
  const history: { event: string; changes: unknown }[] = [];
  const fake = {
    node: { uuid, driver_info: driverInfo, driver_internal_info: {} },
    deps: {
      ...deps,
      store: { addNodeHistory: async (record: { event: string; changes: unknown }) => history.push(record) },
    },
    signal: new AbortController().signal,
    log: silentLogger,
    runningStep: undefined,
    mergeInternalInfo: async (changes: Record<string, unknown>) => Object.assign(internal, changes),
  };
  return { task: fake as unknown as DriverTask, internal, history };
}

describe("burnin_network with dynamic pairing, through the conductor's step", () => {
  it(`pairs two nodes, tells each its role and partner, and records fio's MB/s (${REAL_FIO ? "real fio on loopback" : "simulated fio"})`, async () => {
    const agents = loopbackAgents();
    const deps = {
      agents,
      holder: "test-conductor",
      config: { agent: { commandTimeoutS: 120 } },
      publish: () => undefined,
      // one conductor's meeting point, shared by its tasks
      burninPairing: new NetworkBurninPairing(),
    } as unknown as TaskDeps;
    const port = await freeLoopbackPort();
    const info = { agent_burnin_fio_network_runtime: 1, agent_burnin_fio_network_pairing_timeout: 60 };
    const a = task(A.node, deps, info);
    const b = task(B.node, deps, info);
    const run = burninRun("burnin_network");
    // the step's args give the port (both on one host); role and partner come from the pairing
    await Promise.all([run(a.task, { port, retry_interval: 1 }), run(b.task, { port, retry_interval: 1 })]);

    expect(agents.commands).toEqual([
      { node: A.node, args: { role: "writer", partner: "127.0.0.1", runtime: 1, port, retry_interval: 1 } },
      { node: B.node, args: { role: "reader", partner: "127.0.0.1", runtime: 1, port, retry_interval: 1 } },
    ]);
    for (const [side, partner, first] of [
      [a, B.node, "writer"],
      [b, A.node, "reader"],
    ] as const) {
      const result = side.internal.burnin_network_result as {
        directions: (FioJobResult & { role: string })[];
        pairing: { group: string; partner_node: string };
      };
      expect(result.pairing).toEqual({ group: BURNIN_PAIRING_GROUP, partner_node: partner });
      expect(result.directions.map((d) => d.role)).toEqual(
        first === "writer" ? ["writer", "reader"] : ["reader", "writer"],
      );
      const writing = result.directions.find((d) => d.role === "writer");
      const reading = result.directions.find((d) => d.role === "reader");
      expect(writing?.write_mb_s).toBeGreaterThan(0);
      expect(reading?.read_mb_s).toBeGreaterThan(0);
      expect(side.history[0]?.event).toMatch(
        new RegExp(`^burnin_network passed: .* \\(paired with node ${partner} as ${first}\\)$`),
      );
    }
    // what one side wrote, the other read (all but what was in flight when the writer's time was up)
    const aResult = a.internal.burnin_network_result as { directions: FioJobResult[] };
    const bResult = b.internal.burnin_network_result as { directions: FioJobResult[] };
    const written = aResult.directions[0]?.write_bytes ?? 0;
    const read = bResult.directions[0]?.read_bytes ?? 0;
    expect(read).toBeLessThanOrEqual(written);
    expect(read).toBeGreaterThan(written / 2);
    console.log(
      `burnin_network, dynamically paired on loopback: A wrote ${aResult.directions[0]?.write_mb_s} MB/s, B read ${bResult.directions[0]?.read_mb_s} MB/s; B wrote ${bResult.directions[1]?.write_mb_s} MB/s, A read ${aResult.directions[1]?.read_mb_s} MB/s`,
    );
  }, 120_000);

  it("fails the step naming the group when no partner comes, and says so before any agent command", async () => {
    const agents = loopbackAgents();
    const deps = { agents, holder: "c", config: { agent: { commandTimeoutS: 60 } } } as unknown as TaskDeps;
    const alone = task(C.node, deps, { agent_burnin_fio_network_pairing_timeout: "1" });
    await expect(burninRun("burnin_network")(alone.task, {})).rejects.toThrow(
      /no partner joined pairing group 'ironic\.network-burnin' within 1 s/,
    );
    expect(agents.commands).toEqual([]);
    const badKnob = task(C.node, deps, { agent_burnin_fio_network_pairing_timeout: -1 });
    await expect(burninRun("burnin_network")(badKnob.task, {})).rejects.toThrow(
      /^burnin_network: invalid pairing settings: agent_burnin_fio_network_pairing_timeout: /,
    );
  });
});
