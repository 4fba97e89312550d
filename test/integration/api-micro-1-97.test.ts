import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newPortRecord, type PortRecord } from "../../shared/resources.ts";
import { api, faultOf, startConductor } from "../helpers/conductor.ts";

/**
 * 1.97–1.103 over real HTTP: port description (1.97), JSON Pointer escapes in patch keys (1.98), the port and
 * port group lists by conductor group (1.99), port vendor (1.100) and category (1.101), port group physical
 * network (1.102) and category (1.103); the list filters that came with them (description_contains, shard).
 */
let ctx: Awaited<ReturnType<typeof startConductor>>;
let macs = 0;
const at = (version: string) => ({ "X-OpenStack-Ironic-API-Version": version });
const nextMac = () =>
  `52:54:00:97:${((macs >> 8) % 256).toString(16).padStart(2, "0")}:${(macs++ % 256).toString(16).padStart(2, "0")}`;
type Port = Record<string, unknown> & { uuid: string };

async function node(fields: Record<string, unknown> = {}): Promise<string> {
  const made = await api(`${ctx.url}/v1/nodes`, {
    method: "POST",
    headers: at("1.96"),
    body: { driver: "fake-hardware", ...fields },
  });
  expect(made.status).toBe(201);
  return (made.body as { uuid: string }).uuid;
}

async function port(version: string, body: Record<string, unknown>): Promise<Port> {
  const made = await api(`${ctx.url}/v1/ports`, {
    method: "POST",
    headers: at(version),
    body: { address: nextMac(), ...body },
  });
  expect(made.status, JSON.stringify(made.body)).toBe(201);
  return made.body as Port;
}

const listed = async (path: string, version = "1.103"): Promise<string[]> => {
  const r = await api(`${ctx.url}/v1/${path}`, { headers: at(version) });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  const key =
    (path.split("?")[0] ?? "")
      .split("/")
      .filter((part) => part !== "detail")
      .pop() ?? "";
  return ((r.body as Record<string, { uuid: string }[]>)[key] ?? []).map((item) => item.uuid).sort();
};

beforeAll(async () => {
  ctx = await startConductor({ fakeDelayMs: 0 });
});
afterAll(async () => {
  await ctx?.stop();
});

describe("port description, vendor and category (1.97, 1.100, 1.101)", () => {
  it("are stored on create and shown from their own version", async () => {
    const n = await node();
    const made = await port("1.101", {
      node_uuid: n,
      description: "uplink to tor-1",
      vendor: "mellanox",
      category: "storage",
    });
    expect(made).toMatchObject({ description: "uplink to tor-1", vendor: "mellanox", category: "storage" });
    const show = async (version: string) =>
      (await api(`${ctx.url}/v1/ports/${made.uuid}`, { headers: at(version) })).body as Port;
    expect(await show("1.96")).not.toHaveProperty("description");
    expect(await show("1.97")).toHaveProperty("description", "uplink to tor-1");
    expect(await show("1.99")).not.toHaveProperty("vendor");
    expect(await show("1.100")).toHaveProperty("vendor", "mellanox");
    expect(await show("1.100")).not.toHaveProperty("category");
    expect(await show("1.101")).toHaveProperty("category", "storage");
  });

  it("naming one below its version is a bare 406, on create and in ?fields", async () => {
    const n = await node();
    for (const [field, version] of [
      ["description", "1.96"],
      ["vendor", "1.99"],
      ["category", "1.100"],
    ] as const) {
      const r = await api(`${ctx.url}/v1/ports`, {
        method: "POST",
        headers: at(version),
        body: { address: nextMac(), node_uuid: n, [field]: "x" },
      });
      expect(r.status).toBe(406);
      expect(faultOf(r.body)).toBe("Request not acceptable.");
      const asked = await api(`${ctx.url}/v1/ports?fields=uuid,${field}`, { headers: at(version) });
      expect(asked.status).toBe(406);
    }
  });

  it("keeps Ironic's PORT_SCHEMA lengths (255, 32, 80) with a 400, never a 500", async () => {
    const n = await node();
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(["description", 255], ["vendor", 32], ["category", 80]),
        fc.integer({ min: 0, max: 300 }),
        async ([field, max], length) => {
          const r = await api(`${ctx.url}/v1/ports`, {
            method: "POST",
            headers: at("1.101"),
            body: { address: nextMac(), node_uuid: n, [field]: "v".repeat(length) },
          });
          expect(r.status).toBe(length <= max ? 201 : 400);
        },
      ),
      { numRuns: 40 },
    );
  });

  it("are patched, and a port stored before them reads and patches as null", async () => {
    const n = await node();
    const {
      description: _d,
      vendor: _v,
      category: _c,
      ...old
    } = newPortRecord({ address: nextMac(), node_uuid: n });
    await ctx.conductor.store.createPort(old as PortRecord);
    const before = (await api(`${ctx.url}/v1/ports/${old.uuid}`, { headers: at("1.101") })).body as Port;
    expect(before).toMatchObject({ description: null, vendor: null, category: null });
    const patched = await api(`${ctx.url}/v1/ports/${old.uuid}`, {
      method: "PATCH",
      headers: at("1.101"),
      body: [
        { op: "add", path: "/description", value: "bmc side" },
        { op: "replace", path: "/vendor", value: "intel" },
      ],
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect(patched.body).toMatchObject({ description: "bmc side", vendor: "intel", category: null });
    const removed = await api(`${ctx.url}/v1/ports/${old.uuid}`, {
      method: "PATCH",
      headers: at("1.101"),
      body: [{ op: "remove", path: "/description" }],
    });
    expect(removed.body).toMatchObject({ description: null, vendor: "intel" });
  });

  it("filters the port list by description_contains, ignoring case, on every list", async () => {
    const n = await node();
    const a = await port("1.97", { node_uuid: n, description: "Rack 7 Zebra-Uplink" });
    await port("1.97", { node_uuid: n, description: "rack 8" });
    await port("1.97", { node_uuid: n });
    expect(await listed(`ports?description_contains=zebra-UPLINK`)).toEqual([a.uuid]);
    expect(await listed(`nodes/${n}/ports?description_contains=ZEBRA`)).toEqual([a.uuid]);
    expect(await listed(`ports?node=${n}&description_contains=100%25`)).toEqual([]);
  });
});

describe("list filters from the query are bounded", () => {
  it("an over-long text or list is a 400, never a 500 from the database", async () => {
    const many = Array.from({ length: 1500 }, (_, i) => `s${i}`).join(",");
    for (const path of [
      `ports?shard=${many}`,
      `ports?conductor_groups=${many}`,
      `portgroups?conductor_groups=${many}`,
      `nodes?shard=${many}`,
      `ports?description_contains=${"d".repeat(5000)}`,
      `nodes?description_contains=${"d".repeat(5000)}`,
    ]) {
      const r = await api(`${ctx.url}/v1/${path}`, { headers: at("1.103") });
      expect(r.status, path.slice(0, 40)).toBe(400);
    }
    const within = Array.from({ length: 300 }, (_, i) => `s${i}`).join(",");
    expect((await api(`${ctx.url}/v1/ports?shard=${within}`, { headers: at("1.103") })).status).toBe(200);
  });
});

describe("node description_contains", () => {
  it("filters the node list (it was accepted and ignored before)", async () => {
    const a = await node({ description: "GPU box, rack 3" });
    await node({ description: "storage" });
    expect(await listed("nodes?description_contains=gpu%20BOX")).toEqual([a]);
  });
});

describe("JSON Pointer escapes in patch keys (1.98)", () => {
  it("~1 and ~0 name a key holding / and ~", async () => {
    const n = await node();
    const p = await port("1.98", { node_uuid: n });
    const r = await api(`${ctx.url}/v1/ports/${p.uuid}`, {
      method: "PATCH",
      headers: at("1.98"),
      body: [{ op: "add", path: "/extra/a~1b~0c", value: 1 }],
    });
    expect(r.status).toBe(200);
    expect((r.body as { extra: Record<string, unknown> }).extra).toEqual({ "a/b~c": 1 });
  });
});

describe("lists by conductor group (1.99) and ports by shard (1.82)", () => {
  it("lists the ports and port groups of nodes in the named groups", async () => {
    const east = await node({ conductor_group: "east" });
    const west = await node({ conductor_group: "west" });
    const other = await node({ conductor_group: "north" });
    const pe = await port("1.99", { node_uuid: east });
    const pw = await port("1.99", { node_uuid: west });
    await port("1.99", { node_uuid: other });
    expect(await listed("ports?conductor_groups=east,west")).toEqual([pe.uuid, pw.uuid].sort());
    const group = await api(`${ctx.url}/v1/portgroups`, {
      method: "POST",
      headers: at("1.99"),
      body: { node_uuid: east, address: nextMac() },
    });
    expect(group.status).toBe(201);
    expect(await listed("portgroups?conductor_groups=east")).toEqual([(group.body as Port).uuid]);
    expect(await listed("portgroups?conductor_groups=nowhere")).toEqual([]);
  });

  it("refuses conductor_groups with a node, port group or address filter, as Ironic", async () => {
    const n = await node({ conductor_group: "east" });
    const r = await api(`${ctx.url}/v1/ports?conductor_groups=east&node=${n}`, { headers: at("1.99") });
    expect(r.status).toBe(400);
    expect(faultOf(r.body)).toBe(
      "Filtering by conductor_groups cannot be combined with node_ident, portgroup_ident, or node address filters.",
    );
    const g = await api(`${ctx.url}/v1/portgroups?conductor_groups=east&node=${n}`, { headers: at("1.99") });
    expect(g.status).toBe(400);
    expect(faultOf(g.body)).toBe("Filtering by node, address, or shard simultaneously is not supported.");
  });

  it("lists the ports of nodes in a shard from 1.82; node and shard together are a 403", async () => {
    const sharded = await node({ shard: "s-97" });
    const p = await port("1.97", { node_uuid: sharded });
    await port("1.97", { node_uuid: await node() });
    expect(await listed("ports?shard=s-97", "1.82")).toEqual([p.uuid]);
    expect((await api(`${ctx.url}/v1/ports?shard=s-97`, { headers: at("1.81") })).status).toBe(406);
    const both = await api(`${ctx.url}/v1/ports?shard=s-97&node=${sharded}`, { headers: at("1.82") });
    expect(both.status).toBe(403);
  });
});

describe("port group physical_network (1.102) and category (1.103)", () => {
  it("are shown from their versions and carried to the group's ports", async () => {
    const n = await node();
    const made = await api(`${ctx.url}/v1/portgroups`, {
      method: "POST",
      headers: at("1.103"),
      body: { node_uuid: n, address: nextMac(), physical_network: "physnet1", category: "bond" },
    });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const group = made.body as Port;
    expect(group).toMatchObject({ physical_network: "physnet1", category: "bond" });
    const show = async (version: string) =>
      (await api(`${ctx.url}/v1/portgroups/${group.uuid}`, { headers: at(version) })).body as Port;
    expect(await show("1.101")).not.toHaveProperty("physical_network");
    expect(await show("1.102")).toHaveProperty("physical_network", "physnet1");
    expect(await show("1.102")).not.toHaveProperty("category");
    expect(await show("1.103")).toHaveProperty("category", "bond");

    const member = await port("1.102", { node_uuid: n, portgroup_uuid: group.uuid, physical_network: "old" });
    const outside = await port("1.102", { node_uuid: n, physical_network: "old" });
    const patched = await api(`${ctx.url}/v1/portgroups/${group.uuid}`, {
      method: "PATCH",
      headers: at("1.103"),
      body: [{ op: "replace", path: "/physical_network", value: "physnet2" }],
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    const net = async (uuid: string) =>
      ((await api(`${ctx.url}/v1/ports/${uuid}`, { headers: at("1.103") })).body as Port).physical_network;
    expect(await net(member.uuid)).toBe("physnet2");
    expect(await net(outside.uuid)).toBe("old");

    // a member's own physical network follows its group from 1.102; before it, it may still be set
    const refused = await api(`${ctx.url}/v1/ports/${member.uuid}`, {
      method: "PATCH",
      headers: at("1.102"),
      body: [{ op: "replace", path: "/physical_network", value: "mine" }],
    });
    expect(refused.status).toBe(400);
    expect(faultOf(refused.body)).toBe(
      "physical_network cannot be changed while the port belongs to a portgroup.",
    );
    const older = await api(`${ctx.url}/v1/ports/${member.uuid}`, {
      method: "PATCH",
      headers: at("1.101"),
      body: [{ op: "replace", path: "/physical_network", value: "mine" }],
    });
    expect(older.status).toBe(200);
  });

  it("refuses an empty physical network on a port, and lengths beyond Ironic's schema", async () => {
    const n = await node();
    const r = await api(`${ctx.url}/v1/ports`, {
      method: "POST",
      headers: at("1.102"),
      body: { address: nextMac(), node_uuid: n, physical_network: "" },
    });
    expect(r.status).toBe(400);
    expect(faultOf(r.body)).toBe("A non-empty value is required when setting physical_network");
    const long = await api(`${ctx.url}/v1/portgroups`, {
      method: "POST",
      headers: at("1.103"),
      body: { node_uuid: n, physical_network: "p".repeat(65) },
    });
    expect(long.status).toBe(400);
  });
});

describe("OVN VTEP keys (1.90 until 1.105)", () => {
  it("are a 406 on create outside 1.90–1.104", async () => {
    const n = await node();
    const vtep = { "vtep-logical-switch": "ls1", "vtep-physical-switch": "ps1", port_id: "p1" };
    const create = (version: string) =>
      api(`${ctx.url}/v1/ports`, {
        method: "POST",
        headers: at(version),
        body: { address: nextMac(), node_uuid: n, local_link_connection: vtep },
      });
    expect((await create("1.89")).status).toBe(406);
    expect((await create("1.90")).status).toBe(201);
    expect((await create("1.103")).status).toBe(201);
  });
});
