import { afterEach, describe, expect, it } from "vitest";
import type { CommandTable } from "../../agent/commands/command.ts";
import { COMMANDS } from "../../agent/commands/registry.ts";
import { SimulatedBackend } from "../../agent/hardware/simulated/simulated-backend.ts";
import { AgentLink } from "../../agent/link/client.ts";
import { silentLogger } from "../../shared/log.ts";
import type { CommandName, Welcome } from "../../shared/protocol.ts";
import { sampleInventory } from "../helpers/agent.ts";
import { waitFor } from "../helpers/wait.ts";
import { api, provisionThrough, released, startConductor, waitForState } from "../helpers/conductor.ts";
import { RawAgent } from "../helpers/raw-agent.ts";

const MAC = "52:54:00:aa:00:01";

/** Commands that wait for the test to let them finish, so an attack can be tried while they run. */
class Gates {
  readonly started: CommandName[] = [];
  private readonly open = new Map<CommandName, (value: unknown) => void>();

  gate(name: CommandName): (args: unknown) => Promise<unknown> {
    return () =>
      new Promise((resolve) => {
        this.started.push(name);
        this.open.set(name, resolve);
      });
  }

  release(name: CommandName, value: unknown): void {
    const resolve = this.open.get(name);
    if (!resolve) throw new Error(`${name} is not running`);
    this.open.delete(name);
    resolve(value);
  }
}

type Ctx = Awaited<ReturnType<typeof startConductor>>;

/**
 * Issue 11, class 3: a fake agent that knows only a node's MAC (and invents a boot id, or a token) dials in
 * while the real agent holds the session. It must be refused every time, and the real session, its
 * commands and their results must go on as if it had never come.
 */
describe("a fake agent with only the node's MAC", () => {
  let ctx: Ctx | undefined;
  const links: AgentLink[] = [];
  afterEach(async () => {
    for (const link of links.splice(0)) await link.stop();
    await ctx?.stop();
    ctx = undefined;
  });

  /** Every hello a fake can build without the token: refused, closed, never a command. */
  async function attack(url: string, realBootId: string): Promise<string[]> {
    const attempts: Array<{ bootId: string; token?: string }> = [
      { bootId: "attacker-boot" },
      { bootId: realBootId },
      { bootId: "attacker-boot", token: "A".repeat(43) },
      { bootId: realBootId, token: "forged" },
    ];
    const codes: string[] = [];
    for (const attempt of attempts) {
      const fake = await RawAgent.connect(url);
      fake.hello({ macs: [MAC, "52:54:00:ee:ee:ee"], ...attempt });
      codes.push((await fake.next("error")).code);
      expect(await fake.closed()).toBe(1008);
      expect(fake.frames.filter((frame) => frame.type === "welcome" || frame.type === "command")).toEqual([]);
    }
    return codes;
  }

  it("is refused during inspection, cleaning, fast-track available and deploy; the real agent's work is what lands", async () => {
    ctx = await startConductor({ agent: { fastTrack: true } });
    const { url, conductor } = ctx;
    const wsUrl = `${url.replace(/^http/, "ws")}/v1/agent`;
    const created = await api(`${url}/v1/nodes`, {
      method: "POST",
      body: {
        name: "victim",
        driver: "fake-hardware",
        deploy_interface: "direct",
        inspect_interface: "agent",
      },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const uuid = (created.body as { uuid: string }).uuid;
    const port = await api(`${url}/v1/ports`, { method: "POST", body: { node_uuid: uuid, address: MAC } });
    expect(port.status, JSON.stringify(port.body)).toBe(201);
    const connects: boolean[] = [];
    conductor.events.subscribe((event) => {
      if (event.type === "agent" && event.node === uuid) connects.push(event.connected === true);
    });

    const gates = new Gates();
    const commands: CommandTable = {
      ...COMMANDS,
      get_inventory: gates.gate("get_inventory"),
      erase_devices_metadata: gates.gate("erase_devices_metadata"),
      write_image: gates.gate("write_image"),
    };
    const backend = new SimulatedBackend({ inventory: sampleInventory({ macs: [MAC] }) });
    const realBootId = await backend.bootId();
    const welcomes: Welcome[] = [];
    const link = new AgentLink({
      url: wsUrl,
      backend,
      commands,
      logger: silentLogger,
      agentVersion: "real",
      backoff: { initialMs: 50, maxMs: 400 },
      onWelcome: (welcome) => welcomes.push(welcome),
    });

    await provisionThrough(url, "victim", [
      ["manage", "manageable"],
      ["inspect", "inspect wait"],
    ]);
    links.push(link);
    link.start();
    await waitFor(() => gates.started.includes("get_inventory"), { what: "inspection to call the agent" });

    const refusals: string[] = [];
    refusals.push(...(await attack(wsUrl, realBootId))); // inspecting, get_inventory in flight
    gates.release("get_inventory", sampleInventory({ macs: [MAC] }));
    const inspected = await waitForState(url, "victim", "manageable");
    expect((inspected.properties as { cpus?: number }).cpus).toBe(8);

    // released first and the 202 read: a provide refused while inspection let go would leave the wait below
    // to time out unnamed
    await provisionThrough(url, "victim", [["provide", "cleaning"]]);
    await waitFor(() => gates.started.includes("erase_devices_metadata"), { what: "cleaning" });
    refusals.push(...(await attack(wsUrl, realBootId))); // cleaning, erase in flight
    gates.release("erase_devices_metadata", {});
    await waitForState(url, "victim", "available");

    refusals.push(...(await attack(wsUrl, realBootId))); // fast-track available, agent idle

    await released(url, "victim");
    const patched = await api(`${url}/v1/nodes/victim`, {
      method: "PATCH",
      body: [{ op: "add", path: "/instance_info/image_source", value: "http://127.0.0.1:9/disk.raw" }],
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    await provisionThrough(url, "victim", [["active", "deploying"]]);
    await waitFor(() => gates.started.includes("write_image"), { what: "the deploy to call the agent" });
    refusals.push(...(await attack(wsUrl, realBootId))); // deploying, write_image in flight
    gates.release("write_image", { image_bytes: 4242, written_by: "real" });
    const active = await waitForState(url, "victim", "active");

    expect(refusals.length).toBe(16);
    expect(new Set(refusals)).toEqual(new Set(["TOKEN_REQUIRED", "BAD_TOKEN"]));
    // the real agent was never disturbed: one welcome, one session, every command ran once on it; the session
    // ended only when the node was power-cycled into its instance (the ramdisk's boot was over)
    expect(welcomes.length).toBe(1);
    expect(connects).toEqual([true, false]);
    expect(gates.started).toEqual(["get_inventory", "erase_devices_metadata", "write_image"]);
    expect((active.driver_internal_info as { deploy_result?: unknown }).deploy_result).toEqual({
      image_bytes: 4242,
      written_by: "real",
    });
    // no port from the fake's extra MAC, and the inventory is the real one
    const ports = await api(`${url}/v1/ports?node=${uuid}`);
    expect((ports.body as { ports: Array<{ address: string }> }).ports.map((p) => p.address)).toEqual([MAC]);
  });

  it("is refused after wait call-back once the real agent of this boot holds the token; write_image runs on the real one", async () => {
    ctx = await startConductor();
    const { url } = ctx;
    const wsUrl = `${url.replace(/^http/, "ws")}/v1/agent`;
    const created = await api(`${url}/v1/nodes`, {
      method: "POST",
      body: { name: "victim", driver: "fake-hardware", deploy_interface: "direct" },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const uuid = (created.body as { uuid: string }).uuid;
    const port = await api(`${url}/v1/ports`, { method: "POST", body: { node_uuid: uuid, address: MAC } });
    expect(port.status, JSON.stringify(port.body)).toBe(201);
    const patched = await api(`${url}/v1/nodes/victim`, {
      method: "PATCH",
      body: [
        { op: "add", path: "/instance_info/image_source", value: "http://127.0.0.1:9/disk.raw" },
        { op: "add", path: "/automated_clean", value: false },
      ],
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    await provisionThrough(url, "victim", [
      ["manage", "manageable"],
      ["provide", "available"],
      ["active", "wait call-back"],
    ]);

    const gates = new Gates();
    const backend = new SimulatedBackend({ inventory: sampleInventory({ macs: [MAC] }) });
    const link = new AgentLink({
      url: wsUrl,
      backend,
      commands: { ...COMMANDS, write_image: gates.gate("write_image") },
      logger: silentLogger,
      agentVersion: "real",
      backoff: { initialMs: 50, maxMs: 400 },
    });
    links.push(link);
    link.start();
    await waitFor(() => gates.started.includes("write_image"), { what: "write_image" });
    const codes = await attack(wsUrl, await backend.bootId());
    expect(codes).toEqual(["TOKEN_REQUIRED", "TOKEN_REQUIRED", "BAD_TOKEN", "BAD_TOKEN"]);
    expect(ctx.conductor.gateway.isConnected(uuid)).toBe(true);
    gates.release("write_image", { written_by: "real" });
    const active = await waitForState(url, "victim", "active");
    expect((active.driver_internal_info as { deploy_result?: unknown }).deploy_result).toEqual({
      written_by: "real",
    });
  });
});
