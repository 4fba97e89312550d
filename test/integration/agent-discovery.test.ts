// Auto-discovery through Anvil's own agent: a machine no node has boots the ramdisk and its agent says hello
// over the WebSocket. With discovery on, the conductor enrolls a node for it, asks the agent for its
// inventory, runs the inspection rules and powers the machine off; with discovery off the hello is refused
// and nothing is created. Two hellos racing from one machine enroll one node.
import { mkdtempSync, rmSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ensureAgentBuilt,
  recordingLogger,
  sampleInventory,
  startAgentProcess,
  writeSimulatedMachine,
} from "../helpers/agent.ts";
import { api, startConductor } from "../helpers/conductor.ts";
import { RawAgent } from "../helpers/raw-agent.ts";
import { until } from "../helpers/wait.ts";

type Ctx = Awaited<ReturnType<typeof startConductor>>;
const V96 = { "X-OpenStack-Ironic-API-Version": "1.96" };
const dir = mkdtempSync(join(tmpdir(), "anvil-discovery-"));
const wsOf = (ctx: Ctx): string => ctx.url.replace("http://", "ws://") + "/v1/agent";

interface NodeView {
  uuid: string;
  provision_state: string;
  driver: string;
  driver_info: Record<string, unknown>;
  driver_internal_info: Record<string, unknown>;
  resource_class: string | null;
  properties: Record<string, unknown>;
  last_error: string | null;
}

async function nodesWithMac(ctx: Ctx, mac: string): Promise<string[]> {
  const r = await api(`${ctx.url}/v1/ports?address=${mac}&fields=node_uuid`, { headers: V96 });
  return (r.body as { ports: { node_uuid: string }[] }).ports.map((p) => p.node_uuid);
}

/** A simulated machine that boots the ramdisk: its agent dials in, recording its power actions in `events`. */
function bootMachine(
  ctx: Ctx,
  machine: { executable: string; inventory: string; events: string },
): ReturnType<typeof startAgentProcess> {
  return startAgentProcess({
    executable: machine.executable,
    args: [
      ...["service", "--conductor", wsOf(ctx), "--backend", "simulated"],
      ...["--inventory", machine.inventory, "--events", machine.events],
    ],
  });
}

/** The node discovery made for the machine with this MAC, once there is one. */
const discoveredNode = (ctx: Ctx, mac: string): Promise<string> =>
  until(async () => (await nodesWithMac(ctx, mac))[0], { what: "the discovered node", timeoutMs: 30_000 });

async function allNodes(ctx: Ctx): Promise<string[]> {
  const r = await api(`${ctx.url}/v1/nodes`, { headers: V96 });
  return (r.body as { nodes: { uuid: string }[] }).nodes.map((n) => n.uuid);
}

describe("auto-discovery from the agent's hello", () => {
  let ctx: Ctx;
  let executable = "";
  const lines: string[] = [];

  beforeAll(async () => {
    executable = await ensureAgentBuilt();
    ctx = await startConductor(
      { autoDiscovery: { enabled: true, driver: "ipmi" } },
      { logger: recordingLogger(lines) },
    );
  }, 300_000);
  afterAll(async () => {
    await ctx?.stop();
  });

  it("enrolls the unknown machine, inspects it, the API's rule sets its class and traits, and it powers off", async () => {
    const rule = await api(`${ctx.url}/v1/inspection_rules`, {
      method: "POST",
      headers: V96,
      body: {
        description: "discovered x86 machines with 8 CPUs are medium",
        conditions: [{ op: "eq", args: { values: ["{inventory[cpu][count]}", "8"] } }],
        actions: [
          { op: "set-attribute", args: { path: "resource_class", value: "baremetal-medium" } },
          { op: "add-trait", args: { name: "CUSTOM_DISCOVERED" } },
          { op: "add-trait", args: { name: "CUSTOM_MEDIUM" } },
        ],
      },
    });
    expect(rule.status, JSON.stringify(rule.body)).toBe(201);

    const macs = ["52:54:00:27:aa:01", "52:54:00:27:aa:02"];
    const inventory = {
      ...sampleInventory({ macs }),
      bmc_address: "192.0.2.127",
      boot: { current_boot_mode: "bios" as const, pxe_interface: "01-52-54-00-27-aa-02" },
    };
    const machine = await writeSimulatedMachine(dir, inventory);
    const events = join(dir, "events-1.jsonl");
    // the machine boots the ramdisk: its agent dials in, recording its power actions
    const booted = bootMachine(ctx, { executable, inventory: machine, events });
    try {
      const uuid = await discoveredNode(ctx, macs[0]!);
      const powered = await until(
        async () =>
          (await readFile(events, "utf8").catch(() => "")).includes("power_off") ? true : undefined,
        { what: "the agent told to power off", timeoutMs: 60_000 },
      );
      expect(powered).toBe(true);
      const node = (await api(`${ctx.url}/v1/nodes/${uuid}`, { headers: V96 })).body as NodeView;
      expect(node).toMatchObject({
        provision_state: "enroll",
        driver: "ipmi",
        driver_info: { ipmi_address: "192.0.2.127" },
        resource_class: "baremetal-medium",
        last_error: null,
        properties: { cpus: 8, cpu_arch: inventory.cpu.architecture },
      });
      expect(node.driver_internal_info).not.toHaveProperty("discovery_awaits_agent");
      const traits = await api(`${ctx.url}/v1/nodes/${uuid}/traits`, { headers: V96 });
      expect((traits.body as { traits: string[] }).traits.sort()).toEqual([
        "CUSTOM_DISCOVERED",
        "CUSTOM_MEDIUM",
      ]);
      const ports = await api(`${ctx.url}/v1/ports?node_uuid=${uuid}&detail=true`, { headers: V96 });
      const rows = (ports.body as { ports: { address: string; pxe_enabled: boolean }[] }).ports;
      expect(rows.map((p) => [p.address, p.pxe_enabled]).sort()).toEqual([
        [macs[0], false],
        [macs[1], true], // the inventory's boot interface
      ]);
      const data = await api(`${ctx.url}/v1/nodes/${uuid}/inventory`, { headers: V96 });
      expect(data.status).toBe(200);
      const stored = data.body as { inventory: { interfaces: unknown[] }; plugin_data: object };
      expect(stored.plugin_data).toMatchObject({ auto_discovered: true });
      expect(stored.inventory.interfaces).toHaveLength(2);
      expect(lines.some((line) => line.includes("enrolling a newly discovered node"))).toBe(true);
    } finally {
      await booted.stop();
    }
  });

  it("two hellos from one unknown machine racing enroll one node; one of them is welcomed", async () => {
    const macs = ["52:54:00:27:bb:01"];
    const agents = await Promise.all([RawAgent.connect(wsOf(ctx)), RawAgent.connect(wsOf(ctx))]);
    agents.forEach((agent, i) => agent.hello({ macs, bootId: `race-${i}` }));
    const outcomes = await Promise.all(
      agents.map((agent) =>
        until(() => agent.frames.find((f) => f.type === "welcome" || f.type === "error"), {
          what: "a welcome or a refusal",
        }),
      ),
    );
    expect(outcomes.map((f) => f.type).sort()).toEqual(["error", "welcome"]);
    const refused = outcomes.find((f) => f.type === "error");
    expect(refused).toMatchObject({ code: "TOKEN_REQUIRED" });
    const owners = await nodesWithMac(ctx, macs[0]!);
    expect(owners).toHaveLength(1);
    const welcome = outcomes.find((f) => f.type === "welcome");
    expect(welcome).toMatchObject({ node_uuid: owners[0] });
    for (const agent of agents) agent.socket.close();
  });

  it("tells a discovered machine's agent nothing of other nodes: its own token and get_inventory", async () => {
    // another node with a BMC password exists
    const other = await api(`${ctx.url}/v1/nodes`, {
      method: "POST",
      headers: V96,
      body: { driver: "ipmi", driver_info: { ipmi_address: "192.0.2.1", ipmi_password: "s3cret-bmc" } },
    });
    expect(other.status).toBe(201);
    const agent = await RawAgent.connect(wsOf(ctx));
    agent.hello({ macs: ["52:54:00:27:cc:01"], bootId: "nosy" });
    const welcome = await agent.next("welcome");
    const command = await agent.next("command");
    expect(command).toMatchObject({ name: "get_inventory", args: {} });
    const seen = JSON.stringify([welcome, command, ...agent.frames]);
    expect(seen).not.toContain("s3cret-bmc");
    expect(seen).not.toContain((other.body as { uuid: string }).uuid);
    expect(Object.keys(welcome).sort()).toEqual(
      ["fast_track", "heartbeat_interval_ms", "node_uuid", "token", "type", "v"].sort(),
    );
    agent.socket.close();
  });

  it("refuses an agent whose MACs belong to an enrolled node that expects none, and enrolls nothing", async () => {
    const before = await allNodes(ctx);
    const made = await api(`${ctx.url}/v1/nodes`, { method: "POST", headers: V96, body: { driver: "ipmi" } });
    const uuid = (made.body as { uuid: string }).uuid;
    await api(`${ctx.url}/v1/ports`, {
      method: "POST",
      body: { node_uuid: uuid, address: "52:54:00:27:dd:01" },
    });
    const agent = await RawAgent.connect(wsOf(ctx));
    agent.hello({ macs: ["52:54:00:27:dd:01"] });
    expect(await agent.next("error")).toMatchObject({ code: "UNKNOWN_MAC" });
    expect((await allNodes(ctx)).sort()).toEqual([...before, uuid].sort());
  });
});

describe("auto-discovery with fast track", () => {
  let ctx: Ctx;
  let executable = "";
  beforeAll(async () => {
    executable = await ensureAgentBuilt();
    ctx = await startConductor({
      autoDiscovery: { enabled: true, driver: "fake-hardware" },
      agent: { fastTrack: true },
    });
  }, 300_000);
  afterAll(async () => {
    await ctx?.stop();
  });

  it("keeps the discovered machine's agent up (no power off) for the operator's next action", async () => {
    const macs = ["52:54:00:27:ff:01"];
    const machine = await writeSimulatedMachine(dir, sampleInventory({ macs }));
    const events = join(dir, "events-fast.jsonl");
    const booted = bootMachine(ctx, { executable, inventory: machine, events });
    try {
      const uuid = await discoveredNode(ctx, macs[0]!);
      // discovery done: the flag is cleared and the lock released (a power_off would have been answered)
      await until(
        async () => {
          const node = (await api(`${ctx.url}/v1/nodes/${uuid}`, { headers: V96 })).body as NodeView & {
            reservation: string | null;
          };
          return node.reservation === null && !("discovery_awaits_agent" in node.driver_internal_info)
            ? true
            : undefined;
        },
        { what: "the end of discovery", timeoutMs: 60_000 },
      );
      // the agent still serves commands on the same session, and was never told to power off
      const again = await ctx.conductor.gateway.call(uuid, { name: "get_inventory", args: {} });
      expect(again).toMatchObject({ interfaces: [{ mac_address: macs[0] }] });
      expect(await readFile(events, "utf8").catch(() => "")).not.toContain("power_off");
      expect(ctx.conductor.gateway.isConnected(uuid)).toBe(true);
    } finally {
      await booted.stop();
    }
  });
});

describe("auto-discovery off (the default)", () => {
  let ctx: Ctx;
  const lines: string[] = [];
  beforeAll(async () => {
    ctx = await startConductor({}, { logger: recordingLogger(lines) });
  });
  afterAll(async () => {
    await ctx?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("refuses an unknown agent with UNKNOWN_MAC, logs it, and creates nothing", async () => {
    const agent = await RawAgent.connect(wsOf(ctx));
    agent.hello({ macs: ["52:54:00:27:ee:01"] });
    expect(await agent.next("error")).toMatchObject({ code: "UNKNOWN_MAC" });
    expect(await agent.closed()).toBe(1008);
    expect(await allNodes(ctx)).toEqual([]);
    expect(
      lines.some((line) => line.includes("auto-discovery is off") && line.includes("52:54:00:27:ee:01")),
    ).toBe(true);
  });
});
