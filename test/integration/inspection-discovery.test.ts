// Auto-discovery and inspection rules through the ramdisk API as an IPA-style ramdisk calls it: an unknown
// machine posting its inventory to /v1/continue_inspection is enrolled, inspected and given the resource
// class and traits of a rule created with /v1/inspection_rules; a `fail` rule ends an inspection in
// `inspect failed`.
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { sampleInventory } from "../helpers/agent.ts";
import { api, faultOf, provisionThrough, startConductor, waitForState } from "../helpers/conductor.ts";

type Ctx = Awaited<ReturnType<typeof startConductor>>;
const V = (minor: number) => ({ "X-OpenStack-Ironic-API-Version": `1.${minor}` });
let ctx: Ctx;
const made: string[] = [];

async function createRule(body: Record<string, unknown>): Promise<string> {
  const r = await api(`${ctx.url}/v1/inspection_rules`, { method: "POST", headers: V(96), body });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  const uuid = (r.body as { uuid: string }).uuid;
  made.push(uuid);
  return uuid;
}

async function dropRules(): Promise<void> {
  for (const uuid of made.splice(0))
    await api(`${ctx.url}/v1/inspection_rules/${uuid}`, { method: "DELETE", headers: V(96) });
}

const post = (inventory: unknown, extra: Record<string, unknown> = {}) =>
  api(`${ctx.url}/v1/continue_inspection`, { method: "POST", headers: V(84), body: { inventory, ...extra } });

beforeAll(async () => {
  ctx = await startConductor({ fakeDelayMs: 0, autoDiscovery: { enabled: true, driver: "ipmi" } });
});
afterEach(dropRules);
afterAll(async () => {
  await ctx?.stop();
});

describe("auto-discovery", () => {
  it("enrolls an unknown machine with its ports and BMC address, and the rules give it a class and traits", async () => {
    await createRule({
      description: "x86 machines are gold",
      priority: 10,
      conditions: [{ op: "eq", args: { values: ["{inventory[cpu][architecture]}", "x86_64"] } }],
      actions: [
        { op: "set-attribute", args: { path: "resource_class", value: "baremetal-gold" } },
        { op: "add-trait", args: { name: "CUSTOM_DISCOVERED" } },
        { op: "set-capability", args: { name: "cpu_vendor", value: "{inventory[cpu][model_name]}" } },
      ],
    });
    await createRule({
      description: "never applies",
      priority: 5,
      conditions: [{ op: "eq", args: { values: ["{inventory[cpu][architecture]}", "aarch64"] } }],
      actions: [{ op: "fail", args: { msg: "not for arm" } }],
    });
    const macs = ["52:54:00:27:00:01", "52:54:00:27:00:02"];
    const inventory = { ...sampleInventory({ macs }), bmc_address: "192.0.2.27" };
    const r = await post(inventory, { extra_collector: { x: 1 } });
    expect(r.status, JSON.stringify(r.body)).toBe(202);
    const uuid = (r.body as { node: { uuid: string } }).node.uuid;

    const node = (await api(`${ctx.url}/v1/nodes/${uuid}`, { headers: V(96) })).body as Record<
      string,
      unknown
    >;
    expect(node).toMatchObject({
      provision_state: "enroll",
      driver: "ipmi",
      resource_class: "baremetal-gold",
      last_error: null,
      driver_info: { ipmi_address: "192.0.2.27" },
      properties: { cpus: inventory.cpu.count, cpu_arch: "x86_64" },
    });
    expect((node.properties as { capabilities: string }).capabilities).toContain(
      `cpu_vendor:${inventory.cpu.model_name}`,
    );
    const traits = await api(`${ctx.url}/v1/nodes/${uuid}/traits`, { headers: V(96) });
    expect(traits.body).toEqual({ traits: ["CUSTOM_DISCOVERED"] });
    const ports = await api(`${ctx.url}/v1/ports?node_uuid=${uuid}`, { headers: V(96) });
    expect((ports.body as { ports: { address: string }[] }).ports.map((p) => p.address).sort()).toEqual(macs);
    const data = await api(`${ctx.url}/v1/nodes/${uuid}/inventory`, { headers: V(96) });
    expect(data.status).toBe(200);
    expect((data.body as { plugin_data: Record<string, unknown> }).plugin_data).toMatchObject({
      auto_discovered: true,
      extra_collector: { x: 1 },
    });

    // the same machine again: its MACs now name an enrolled node, which waits for no inspection
    const again = await post(inventory);
    expect(again.status).toBe(404);
  });

  it("keeps a discovered node whose rule fails, with the rule's message in last_error", async () => {
    await createRule({
      actions: [{ op: "fail", args: { msg: "this machine is not allowed" } }],
    });
    const inventory = sampleInventory({ macs: ["52:54:00:27:00:09"] });
    const r = await post(inventory);
    expect(r.status).toBe(202);
    const uuid = (r.body as { node: { uuid: string } }).node.uuid;
    const node = (await api(`${ctx.url}/v1/nodes/${uuid}`, { headers: V(96) })).body as Record<
      string,
      unknown
    >;
    expect(node.provision_state).toBe("enroll");
    // NOTE: a fail action's message is not interpolated (Ironic formats no argument of `fail`)
    expect(node.last_error).toBe(
      "Failed to finish inspection: Failed to inspect hardware. Reason: this machine is not allowed",
    );
  });
});

describe("rules after in-band inspection", () => {
  async function waitingNode(name: string, mac: string): Promise<string> {
    const made = await api(`${ctx.url}/v1/nodes`, {
      method: "POST",
      headers: V(84),
      body: { driver: "fake-hardware", inspect_interface: "agent", name },
    });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const uuid = (made.body as { uuid: string }).uuid;
    const port = await api(`${ctx.url}/v1/ports`, {
      method: "POST",
      body: { node_uuid: uuid, address: mac },
    });
    expect(port.status, JSON.stringify(port.body)).toBe(201);
    await provisionThrough({ url: ctx.url, headers: V(84) }, uuid, [
      ["manage", "manageable"],
      ["inspect", "inspect wait"],
    ]);
    return uuid;
  }

  it("sets the resource class and traits of a known node, which returns to manageable", async () => {
    await createRule({
      conditions: [{ op: "gt", args: { values: ["{inventory[cpu][count]}", "0"] } }],
      actions: [
        { op: "set-attribute", args: { path: "resource_class", value: "inspected" } },
        { op: "add-trait", args: { name: "CUSTOM_INSPECTED" } },
      ],
    });
    const mac = "52:54:00:27:01:01";
    const uuid = await waitingNode("rules-inband", mac);
    expect((await post(sampleInventory({ macs: [mac] }))).status).toBe(202);
    await waitForState(ctx.url, uuid, "manageable");
    const node = (await api(`${ctx.url}/v1/nodes/${uuid}`, { headers: V(96) })).body as Record<
      string,
      unknown
    >;
    expect(node).toMatchObject({ resource_class: "inspected", traits: ["CUSTOM_INSPECTED"] });
  });

  it("ends in inspect failed with last_error when a rule fails", async () => {
    await createRule({ actions: [{ op: "fail", args: { msg: "rejected by rule" } }] });
    const mac = "52:54:00:27:01:02";
    const uuid = await waitingNode("rules-fail", mac);
    expect((await post(sampleInventory({ macs: [mac] }))).status).toBe(202);
    await expect(waitForState(ctx.url, uuid, "manageable")).rejects.toThrow();
    const node = (await api(`${ctx.url}/v1/nodes/${uuid}`, { headers: V(96) })).body as Record<
      string,
      unknown
    >;
    expect(node.provision_state).toBe("inspect failed");
    expect(node.last_error).toBe("Failed to inspect hardware. Reason: rejected by rule");
  });

  it("refuses an unknown machine when discovery is off (the default)", async () => {
    const off = await startConductor({ fakeDelayMs: 0 });
    try {
      const r = await api(`${off.url}/v1/continue_inspection`, {
        method: "POST",
        headers: V(84),
        body: { inventory: sampleInventory({ macs: ["52:54:00:27:02:01"] }) },
      });
      expect(r.status).toBe(404);
      expect(faultOf(r.body)).toBe("Resource could not be found.");
      expect(await off.conductor.store.listNodes({}, {})).toEqual([]);
    } finally {
      await off.stop();
    }
  });
});
