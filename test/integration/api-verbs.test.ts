import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_VERSION_STRING } from "../../conductor/api/microversion.ts";
import { api, faultOf, powerOff, startConductor, waitForState } from "../helpers/conductor.ts";
import { until } from "../helpers/wait.ts";

/**
 * Raw requests to the endpoints and verbs of issue 23 (shards 1.82, deploy/undeploy 1.73, reset_interfaces
 * 1.45, the node's allocation 1.52, boot mode and secure boot 1.76, driver fields 1.77), compared with
 * Ironic's documented answers (api-ref and its controllers): status, microversion headers, key sets, texts.
 */
let ctx: Awaited<ReturnType<typeof startConductor>>;
const at = (version: string) => ({ "X-OpenStack-Ironic-API-Version": version });
const keys = (body: unknown): string[] => Object.keys(body as object).sort();

async function createNode(body: Record<string, unknown>): Promise<string> {
  const r = await api(`${ctx.url}/v1/nodes`, { method: "POST", body: { driver: "fake-hardware", ...body } });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return (r.body as { uuid: string }).uuid;
}

async function provision(node: string, target: string, version = "1.78") {
  return api(`${ctx.url}/v1/nodes/${node}/states/provision`, {
    method: "PUT",
    body: { target },
    headers: at(version),
  });
}

async function availableNode(body: Record<string, unknown>): Promise<string> {
  const uuid = await createNode(body);
  expect((await provision(uuid, "manage")).status).toBe(202);
  await waitForState(ctx.url, uuid, "manageable");
  expect((await provision(uuid, "provide")).status).toBe(202);
  await waitForState(ctx.url, uuid, "available");
  return uuid;
}

function expectVersionHeaders(headers: Headers, current: string): void {
  expect(headers.get("x-openstack-ironic-api-version")).toBe(current);
  expect(headers.get("x-openstack-ironic-api-minimum-version")).toBe("1.1");
  expect(headers.get("x-openstack-ironic-api-maximum-version")).toBe(MAX_VERSION_STRING);
}

beforeAll(async () => {
  ctx = await startConductor({ fakeDelayMs: 0 });
});
afterAll(async () => {
  await ctx?.stop();
});

describe("shards (1.82)", () => {
  it('GET /v1/shards counts nodes per shard, most first, unsharded nodes as "None"', async () => {
    await createNode({ name: "shard-a1", shard: "rack-a" });
    await createNode({ name: "shard-a2", shard: "rack-a" });
    await createNode({ name: "shard-b1", shard: "rack-b" });
    const r = await api(`${ctx.url}/v1/shards`, { headers: at("1.82") });
    expect(r.status).toBe(200);
    expectVersionHeaders(r.headers, "1.82");
    const { shards } = r.body as { shards: { name: string; count: number }[] };
    expect(keys(r.body)).toEqual(["shards"]);
    for (const entry of shards) expect(keys(entry)).toEqual(["count", "name"]);
    const counts = Object.fromEntries(shards.map((s) => [s.name, s.count]));
    expect(counts["rack-a"]).toBe(2);
    expect(counts["rack-b"]).toBe(1);
    const sorted = [...shards].sort((a, b) => b.count - a.count);
    expect(shards.map((s) => s.count)).toEqual(sorted.map((s) => s.count));
    // every node is counted once
    const all = await api(`${ctx.url}/v1/nodes`, { headers: at("1.82") });
    const total = (all.body as { nodes: unknown[] }).nodes.length;
    expect(shards.reduce((sum, s) => sum + s.count, 0)).toBe(total);
  });

  it("is a 404 below 1.82 with Ironic's text, and one shard is no resource", async () => {
    const old = await api(`${ctx.url}/v1/shards`, { headers: at("1.81") });
    expect(old.status).toBe(404);
    expect(faultOf(old.body)).toBe("The API version does not allow shards");
    expect((await api(`${ctx.url}/v1/shards/rack-a`, { headers: at("1.82") })).status).toBe(404);
  });

  it("filters nodes by ?shard= (a list) and ?sharded=, 406 below 1.82", async () => {
    const names = async (query: string): Promise<string[]> => {
      const r = await api(`${ctx.url}/v1/nodes?${query}&fields=name,shard`, { headers: at("1.82") });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      return (r.body as { nodes: { name: string }[] }).nodes.map((n) => n.name).sort();
    };
    expect(await names("shard=rack-a")).toEqual(["shard-a1", "shard-a2"]);
    expect(await names("shard=rack-a,rack-b")).toEqual(["shard-a1", "shard-a2", "shard-b1"]);
    expect(await names("sharded=true")).toEqual(["shard-a1", "shard-a2", "shard-b1"]);
    expect(await names("sharded=false")).not.toContain("shard-a1");
    const old = await api(`${ctx.url}/v1/nodes?shard=rack-a`, { headers: at("1.81") });
    expect(old.status).toBe(406);
    expect(faultOf(old.body)).toBe("Request not acceptable. The minimal required API version should be 1.82");
  });
});

describe("deploy and undeploy (1.73)", () => {
  it("are active and deleted from 1.73, a 406 before", async () => {
    const node = await availableNode({ name: "verbs-deploy" });
    const early = await provision(node, "deploy", "1.72");
    expect(early.status).toBe(406);
    const deploy = await provision(node, "deploy", "1.73");
    expect(deploy.status, JSON.stringify(deploy.body)).toBe(202);
    expect(deploy.headers.get("location")).toBe(`${ctx.url}/v1/nodes/${node}/states`);
    expectVersionHeaders(deploy.headers, "1.73");
    await waitForState(ctx.url, node, "active");
    expect((await provision(node, "undeploy", "1.73")).status).toBe(202);
    await waitForState(ctx.url, node, "available");
  });
});

describe("reset_interfaces (1.45)", () => {
  it("a driver change keeps the node's interfaces (400 where the new type lacks them) unless reset", async () => {
    const node = await createNode({ name: "verbs-reset" });
    const toIpmi = [{ op: "replace", path: "/driver", value: "ipmi" }];
    const kept = await api(`${ctx.url}/v1/nodes/${node}`, { method: "PATCH", body: toIpmi });
    expect(kept.status).toBe(400);
    expect(faultOf(kept.body)).toMatch(
      /interface implementation 'fake' is not supported by hardware type ipmi\.$/,
    );

    const early = await api(`${ctx.url}/v1/nodes/${node}?reset_interfaces=true`, {
      method: "PATCH",
      body: toIpmi,
      headers: at("1.44"),
    });
    expect(early.status).toBe(406);

    const noDriver = await api(`${ctx.url}/v1/nodes/${node}?reset_interfaces=true`, {
      method: "PATCH",
      body: [{ op: "add", path: "/extra/a", value: 1 }],
    });
    expect(noDriver.status).toBe(400);
    expect(faultOf(noDriver.body)).toBe(
      "The reset_interfaces parameter can only be used when changing the node's driver.",
    );

    const reset = await api(`${ctx.url}/v1/nodes/${node}?reset_interfaces=true`, {
      method: "PATCH",
      body: [...toIpmi, { op: "replace", path: "/raid_interface", value: "agent" }],
    });
    expect(reset.status, JSON.stringify(reset.body)).toBe(200);
    expect(reset.body).toMatchObject({
      driver: "ipmi",
      power_interface: "ipmitool",
      management_interface: "ipmitool",
      deploy_interface: "direct",
      // named in the same patch: kept over the new type's default (no-raid)
      raid_interface: "agent",
    });
  });
});

describe("the node's allocation (1.52)", () => {
  it("GET shows it with the allocation's keys; DELETE removes it; 404s with Ironic's texts", async () => {
    const node = await availableNode({ name: "verbs-alloc", resource_class: "verbs-rc" });
    await powerOff(ctx.url, node); // fake-hardware: no power state, no allocation, until a power action
    const created = await api(`${ctx.url}/v1/allocations`, {
      method: "POST",
      body: { resource_class: "verbs-rc", name: "verbs-allocation" },
    });
    expect(created.status).toBe(201);
    const allocation = created.body as { uuid: string; node_uuid: string };
    expect(allocation.node_uuid).toBe(node);

    const shown = await api(`${ctx.url}/v1/nodes/verbs-alloc/allocation`, { headers: at("1.52") });
    expect(shown.status).toBe(200);
    expectVersionHeaders(shown.headers, "1.52");
    const direct = await api(`${ctx.url}/v1/allocations/${allocation.uuid}`, { headers: at("1.52") });
    expect(keys(shown.body)).toEqual(keys(direct.body));
    expect((shown.body as { uuid: string }).uuid).toBe(allocation.uuid);
    const some = await api(`${ctx.url}/v1/nodes/${node}/allocation?fields=uuid,state`);
    expect(keys(some.body)).toEqual(["links", "state", "uuid"]);

    const old = await api(`${ctx.url}/v1/nodes/${node}/allocation`, { headers: at("1.51") });
    expect(old.status).toBe(404);
    expect(faultOf(old.body)).toBe("The API version does not allow allocations");

    const removed = await api(`${ctx.url}/v1/nodes/${node}/allocation`, { method: "DELETE" });
    expect(removed.status).toBe(204);
    expect((await api(`${ctx.url}/v1/allocations/${allocation.uuid}`)).status).toBe(404);
    const after = await api(`${ctx.url}/v1/nodes/${node}`);
    expect((after.body as { instance_uuid: string | null }).instance_uuid).toBeNull();
    const none = await api(`${ctx.url}/v1/nodes/verbs-alloc/allocation`);
    expect(none.status).toBe(404);
    expect(faultOf(none.body)).toBe("Allocation for node verbs-alloc was not found");
    const ghost = await api(`${ctx.url}/v1/nodes/no-such-node/allocation`);
    expect(ghost.status).toBe(404);
  });
});

describe("boot mode and secure boot (1.76)", () => {
  const put = (node: string, what: string, body: unknown) =>
    api(`${ctx.url}/v1/nodes/${node}/states/${what}`, { method: "PUT", body, headers: at("1.76") });
  const settled = (node: string, field: string, value: unknown) =>
    until(
      async () => {
        const r = await api(`${ctx.url}/v1/nodes/${node}`);
        return (r.body as Record<string, unknown>)[field] === value ? true : undefined;
      },
      { what: `${node}.${field} to be ${String(value)}` },
    );

  it("fake-hardware records both: 202 with the states Location, then the node shows them", async () => {
    const node = await createNode({ name: "verbs-boot" });
    const mode = await put(node, "boot_mode", { target: "uefi" });
    expect(mode.status, JSON.stringify(mode.body)).toBe(202);
    expect(mode.headers.get("location")).toBe(`${ctx.url}/v1/nodes/${node}/states`);
    expectVersionHeaders(mode.headers, "1.76");
    await settled(node, "boot_mode", "uefi");
    const secure = await put(node, "secure_boot", { target: true });
    expect(secure.status).toBe(202);
    await settled(node, "secure_boot", true);
    const off = await put(node, "secure_boot", { target: "false" });
    expect(off.status).toBe(202);
    await settled(node, "secure_boot", false);
    const states = await api(`${ctx.url}/v1/nodes/${node}/states`);
    expect(states.body).toMatchObject({ boot_mode: "uefi", secure_boot: false });
  });

  it("answers Ironic's texts: 404 below 1.76, bad targets 400, secure boot unsupported on ipmi", async () => {
    const node = await createNode({ name: "verbs-boot-bad" });
    const old = await api(`${ctx.url}/v1/nodes/${node}/states/boot_mode`, {
      method: "PUT",
      body: { target: "uefi" },
      headers: at("1.75"),
    });
    expect(old.status).toBe(404);
    expect(faultOf(old.body)).toBe("This endpoint is supported starting with the API version 1.76");
    const bad = await put(node, "boot_mode", { target: "efi" });
    expect(bad.status).toBe(400);
    expect(faultOf(bad.body)).toBe(
      "Invalid boot mode efi requested for node. Allowed boot modes are: bios, uefi",
    );
    const none = await put(node, "secure_boot", {});
    expect(none.status).toBe(400);
    expect(faultOf(none.body)).toBe(
      "Invalid secure_boot None requested for node. Allowed secure_boot states are: True, False) ",
    );
    const ipmi = await createNode({
      name: "verbs-boot-ipmi",
      driver: "ipmi",
      driver_info: { ipmi_address: "127.0.0.1" },
    });
    const unsupported = await put(ipmi, "secure_boot", { target: true });
    expect(unsupported.status).toBe(400);
    expect(faultOf(unsupported.body)).toBe(
      "Driver ipmi does not support set_secure_boot_state (disabled or not implemented).",
    );
  });

  it("no target a client sends is a 500 (generated)", async () => {
    const node = await createNode({ name: "verbs-boot-fuzz" });
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom("boot_mode", "secure_boot"),
        fc.oneof(fc.string(), fc.integer(), fc.constant(null), fc.jsonValue()),
        async (what, target) => {
          const r = await put(node, what, { target });
          expect([202, 400]).toContain(r.status);
          if (r.status === 400) expect(faultOf(r.body).length).toBeGreaterThan(0);
        },
      ),
      { numRuns: 40 },
    );
  });
});

describe("driver fields (1.77)", () => {
  it("keeps the named fields (and links) on the list and one driver; 406 before, 400 when invalid", async () => {
    const list = await api(`${ctx.url}/v1/drivers?fields=name`, { headers: at("1.77") });
    expect(list.status).toBe(200);
    expectVersionHeaders(list.headers, "1.77");
    const drivers = (list.body as { drivers: Record<string, unknown>[] }).drivers;
    expect(drivers.length).toBeGreaterThan(0);
    for (const d of drivers) expect(keys(d)).toEqual(["links", "name"]);
    const one = await api(`${ctx.url}/v1/drivers/fake-hardware?fields=name,default_power_interface`, {
      headers: at("1.77"),
    });
    expect(one.body).toEqual({
      name: "fake-hardware",
      default_power_interface: "fake",
      links: (one.body as { links: unknown }).links,
    });
    expect((await api(`${ctx.url}/v1/drivers?fields=name`, { headers: at("1.76") })).status).toBe(406);
    const both = await api(`${ctx.url}/v1/drivers?fields=name&detail=true`, { headers: at("1.77") });
    expect(both.status).toBe(400);
    expect(faultOf(both.body)).toBe("Can not specify ?detail=True and fields in the same request.");
    const invalid = await api(`${ctx.url}/v1/drivers/fake-hardware?fields=nope`, { headers: at("1.77") });
    expect(invalid.status).toBe(400);
    expect(faultOf(invalid.body)).toBe('Field(s) "nope" are not valid');
  });

  it("shows each interface's keys from the version that added it", async () => {
    const at32 = await api(`${ctx.url}/v1/drivers/fake-hardware`, { headers: at("1.32") });
    expect(keys(at32.body)).not.toContain("default_storage_interface");
    expect(keys(at32.body)).toContain("default_power_interface");
    const at40 = await api(`${ctx.url}/v1/drivers/fake-hardware`, { headers: at("1.40") });
    for (const kind of ["storage", "rescue", "bios"])
      expect(keys(at40.body)).toContain(`enabled_${kind}_interfaces`);
  });
});

describe("allocation create: the texts clients match on", () => {
  it("names Ironic's jsonschema and name-check texts", async () => {
    const create = async (body: Record<string, unknown>): Promise<string> => {
      const r = await api(`${ctx.url}/v1/allocations`, { method: "POST", body });
      expect(r.status).toBe(400);
      return faultOf(r.body);
    };
    const long = "x".repeat(81);
    expect(await create({ resource_class: long })).toBe(`Schema error for allocation: '${long}' is too long`);
    expect(await create({ resource_class: "rc", traits: ["foo"] })).toBe(
      "Schema error for allocation: 'foo' is not valid under any of the given schemas. Possible root cause: 'foo' does not match '^CUSTOM_[A-Z0-9_]+$'",
    );
    expect(await create({ resource_class: "rc", name: "not/a/name" })).toBe(
      "Cannot create allocation with invalid name 'not/a/name'",
    );
    expect(await create({ resource_class: "rc", uuid: "!@#" })).toBe("Expected UUID for uuid: !@#");
  });
});

describe("deploy template create: the texts clients match on", () => {
  it("names Ironic's TEMPLATE_SCHEMA and uuid texts", async () => {
    const steps = [{ interface: "bios", step: "apply_configuration", args: {}, priority: 10 }];
    const create = async (body: Record<string, unknown>): Promise<string> => {
      const r = await api(`${ctx.url}/v1/deploy_templates`, { method: "POST", body, headers: at("1.55") });
      expect(r.status).toBe(400);
      return faultOf(r.body);
    };
    for (const name of ["foo", "not/a/name"])
      expect(await create({ name, steps })).toBe(
        `Schema error for template: '${name}' is not valid under any of the given schemas. Possible root cause: '${name}' does not match '^CUSTOM_[A-Z0-9_]+$'`,
      );
    expect(await create({ name: "CUSTOM_X", steps: [] })).toBe("Schema error for template: [] is too short");
    expect(await create({ name: "CUSTOM_X", steps, uuid: "!@#" })).toBe("Expected UUID for uuid: !@#");
  });
});
