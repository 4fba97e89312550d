import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, faultOf, powerOff, startConductor, waitForState } from "../helpers/conductor.ts";

/** Small answers Nova and openstacksdk depend on, checked on the wire against Ironic's status and text. */
describe("Ironic's answers the real clients rely on", () => {
  let ctx: Awaited<ReturnType<typeof startConductor>>;

  const provision = async (node: string, target: string, state: string): Promise<void> => {
    const { status } = await api(`${ctx.url}/v1/nodes/${node}/states/provision`, {
      method: "PUT",
      body: { target },
    });
    expect(status).toBe(202);
    await waitForState(ctx.url, node, state);
  };
  const availableNode = async (name: string): Promise<string> => {
    const created = await api(`${ctx.url}/v1/nodes`, {
      method: "POST",
      body: { driver: "fake-hardware", name, resource_class: "compat" },
    });
    expect(created.status).toBe(201);
    const uuid = String((created.body as { uuid: string }).uuid);
    await provision(uuid, "manage", "manageable");
    await provision(uuid, "provide", "available");
    return uuid;
  };

  beforeAll(async () => {
    ctx = await startConductor({ fakeDelayMs: 0 });
  });
  afterAll(async () => {
    await ctx.stop();
  });

  it("accepts removing /instance_uuid and /instance_info after undeploy, when they are already empty", async () => {
    const node = await availableNode("undeployed");
    const instance = "7e0b4a8e-3f0c-4c55-9d51-2f9d1c6a0b11";
    const reserved = await api(`${ctx.url}/v1/nodes/${node}`, {
      method: "PATCH",
      body: [
        { op: "add", path: "/instance_uuid", value: instance },
        { op: "add", path: "/instance_info/image_source", value: "http://127.0.0.1/image.raw" },
      ],
    });
    expect(reserved.status).toBe(200);
    await provision(node, "active", "active");
    await provision(node, "deleted", "available");
    const after = (await api(`${ctx.url}/v1/nodes/${node}`)).body as { instance_uuid: unknown };
    expect(after.instance_uuid).toBeNull();

    // what Nova's driver sends when it removes its deploy parameters (and openstacksdk's unset)
    const removed = await api(`${ctx.url}/v1/nodes/${node}`, {
      method: "PATCH",
      body: [
        { op: "remove", path: "/instance_info" },
        { op: "remove", path: "/instance_uuid" },
      ],
    });
    expect(removed.status, JSON.stringify(removed.body)).toBe(200);
    const body = removed.body as { instance_uuid: unknown; instance_info: unknown };
    expect(body.instance_uuid).toBeNull();
    expect(body.instance_info).toEqual({});
  });

  it("refuses removing a field the node does not have at all", async () => {
    const node = await availableNode("no-such-field");
    const { status, body } = await api(`${ctx.url}/v1/nodes/${node}`, {
      method: "PATCH",
      body: [{ op: "remove", path: "/no_such_field" }],
    });
    expect(status).toBe(400);
    expect(faultOf(body)).toMatch(/no_such_field/);
  });

  it("answers 400 'Nodes cannot be found' for unknown candidate nodes and creates nothing", async () => {
    const known = await availableNode("candidate-known");
    const { status, body } = await api(`${ctx.url}/v1/allocations`, {
      method: "POST",
      body: { resource_class: "compat", candidate_nodes: [known, "ghost-1", "ghost-2", "ghost-1"] },
    });
    expect(status).toBe(400);
    expect(faultOf(body)).toBe("Nodes cannot be found: ghost-1, ghost-2");
    const listed = (await api(`${ctx.url}/v1/allocations`)).body as { allocations: unknown[] };
    expect(listed.allocations).toEqual([]);
  });

  it("stores candidate nodes named by name as UUIDs, in the order given", async () => {
    const first = await availableNode("candidate-a");
    const second = await availableNode("candidate-b");
    // fake-hardware has no power state until a power action (Ironic's); allocations skip such nodes
    await Promise.all([first, second].map((uuid) => powerOff(ctx.url, uuid)));
    const { status, body } = await api(`${ctx.url}/v1/allocations`, {
      method: "POST",
      body: { resource_class: "compat", candidate_nodes: ["candidate-b", first] },
    });
    expect(status).toBe(201);
    const allocation = body as { candidate_nodes: string[]; state: string; node_uuid: string };
    expect(allocation.candidate_nodes).toEqual([second, first]);
    expect(allocation.state).toBe("active");
    expect([first, second]).toContain(allocation.node_uuid);
  });
});
