import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  api,
  faultOf,
  provisionThrough,
  released,
  startConductor,
  waitForState,
} from "../helpers/conductor.ts";
import { at, microApi, type Body } from "../helpers/micro-api.ts";

/**
 * 1.111–1.115 over real HTTP: dynamic port group fields (1.111), runbook traits (1.112), firmware
 * components' identity fields (1.114).
 */
let ctx: Awaited<ReturnType<typeof startConductor>>;
const { nextMac, node } = microApi(() => ctx.url, "52:54:01:11:00");

beforeAll(async () => {
  ctx = await startConductor({ fakeDelayMs: 0 });
});
afterAll(async () => {
  await ctx?.stop();
});

describe("dynamic port group fields (1.111)", () => {
  const createPort = (version: string, fields: Body) =>
    api(`${ctx.url}/v1/ports`, {
      method: "POST",
      headers: at(version),
      body: { address: nextMac(), ...fields },
    });

  it("port available_for_dynamic_portgroup: true by default, written on create and PATCH, hidden below", async () => {
    const n = await node("1.111");
    const plain = await createPort("1.111", { node_uuid: n.uuid });
    expect(plain.status).toBe(201);
    expect((plain.body as Body).available_for_dynamic_portgroup).toBe(true);
    const off = await createPort("1.111", { node_uuid: n.uuid, available_for_dynamic_portgroup: false });
    expect(off.status).toBe(201);
    const uuid = (off.body as { uuid: string }).uuid;
    expect((off.body as Body).available_for_dynamic_portgroup).toBe(false);
    const old = await api(`${ctx.url}/v1/ports/${uuid}`, { headers: at("1.110") });
    expect(old.body).not.toHaveProperty("available_for_dynamic_portgroup");
    expect(old.body).toHaveProperty("category");
    // below 1.111: a create naming it and ?fields= naming it are Ironic's bare 406
    const refused = await createPort("1.110", { node_uuid: n.uuid, available_for_dynamic_portgroup: true });
    expect(refused.status).toBe(406);
    expect(faultOf(refused.body)).toBe("Request not acceptable.");
    const fields = await api(`${ctx.url}/v1/ports?fields=uuid,available_for_dynamic_portgroup`, {
      headers: at("1.110"),
    });
    expect(fields.status).toBe(406);
    const listed = await api(
      `${ctx.url}/v1/ports?fields=uuid,available_for_dynamic_portgroup&node=${n.uuid}`,
      {
        headers: at("1.111"),
      },
    );
    const flags = (listed.body as { ports: Body[] }).ports.map((p) => p.available_for_dynamic_portgroup);
    expect(flags.sort()).toEqual([false, true]);
    const patch = (version: string, body: unknown) =>
      api(`${ctx.url}/v1/ports/${uuid}`, { method: "PATCH", headers: at(version), body });
    const on = await patch("1.111", [
      { op: "replace", path: "/available_for_dynamic_portgroup", value: true },
    ]);
    expect(on.status, JSON.stringify(on.body)).toBe(200);
    expect((on.body as Body).available_for_dynamic_portgroup).toBe(true);
    await patch("1.111", [{ op: "replace", path: "/available_for_dynamic_portgroup", value: false }]);
    const removed = await patch("1.111", [{ op: "remove", path: "/available_for_dynamic_portgroup" }]);
    expect((removed.body as Body).available_for_dynamic_portgroup).toBe(true);
  });

  it("refuses anything but a JSON boolean with a 400, never a 500", async () => {
    const n = await node("1.111");
    const made = await createPort("1.111", { node_uuid: n.uuid });
    const uuid = (made.body as { uuid: string }).uuid;
    await fc.assert(
      fc.asyncProperty(fc.jsonValue(), async (value) => {
        const created = await createPort("1.111", {
          node_uuid: n.uuid,
          available_for_dynamic_portgroup: value,
        });
        const patched = await api(`${ctx.url}/v1/ports/${uuid}`, {
          method: "PATCH",
          headers: at("1.111"),
          body: [{ op: "add", path: "/available_for_dynamic_portgroup", value }],
        });
        const ok = typeof value === "boolean";
        expect(created.status).toBe(ok ? 201 : 400);
        expect(patched.status).toBe(ok || value === null ? 200 : 400);
        if (created.status === 201)
          await api(`${ctx.url}/v1/ports/${(created.body as { uuid: string }).uuid}`, { method: "DELETE" });
      }),
      { numRuns: 30 },
    );
  });

  it("port group dynamic_portgroup: false, read-only, shown from 1.111", async () => {
    const n = await node("1.111");
    const made = await api(`${ctx.url}/v1/portgroups`, {
      method: "POST",
      headers: at("1.111"),
      body: { node_uuid: n.uuid, address: nextMac() },
    });
    expect(made.status).toBe(201);
    const uuid = (made.body as { uuid: string }).uuid;
    expect((made.body as Body).dynamic_portgroup).toBe(false);
    const old = await api(`${ctx.url}/v1/portgroups/${uuid}`, { headers: at("1.110") });
    expect(old.body).not.toHaveProperty("dynamic_portgroup");
    expect(old.body).toHaveProperty("category");
    const oldFields = await api(`${ctx.url}/v1/portgroups/${uuid}?fields=uuid,dynamic_portgroup`, {
      headers: at("1.110"),
    });
    expect(oldFields.status).toBe(406);
    const fields = await api(`${ctx.url}/v1/portgroups?fields=uuid,dynamic_portgroup&node=${n.uuid}`, {
      headers: at("1.111"),
    });
    expect((fields.body as { portgroups: Body[] }).portgroups).toEqual([
      { uuid, dynamic_portgroup: false, links: expect.any(Array) },
    ]);
    const patched = await api(`${ctx.url}/v1/portgroups/${uuid}`, {
      method: "PATCH",
      headers: at("1.111"),
      body: [{ op: "replace", path: "/dynamic_portgroup", value: true }],
    });
    expect(patched.status).toBe(400);
    const created = await api(`${ctx.url}/v1/portgroups`, {
      method: "POST",
      headers: at("1.111"),
      body: { node_uuid: n.uuid, address: nextMac(), dynamic_portgroup: true },
    });
    expect(created.status).toBe(400);
    const shown = await api(`${ctx.url}/v1/portgroups/${uuid}`, { headers: at("1.111") });
    expect((shown.body as Body).dynamic_portgroup).toBe(false);
  });
});

describe("runbook traits (1.112)", () => {
  const LOG = { interface: "vendor", step: "log_passthrough", args: {}, order: 0 };
  const RAID = [{ interface: "raid", step: "delete_configuration", args: {}, order: 0 }];
  let serial = 0;
  const call = (version: string, path: string, init: { method?: string; body?: unknown } = {}) =>
    api(`${ctx.url}${path}`, { ...init, headers: at(version) });
  async function runbook(version: string, body: Body): Promise<Body & { uuid: string }> {
    const made = await call(version, "/v1/runbooks", { method: "POST", body: { steps: [LOG], ...body } });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    return made.body as Body & { uuid: string };
  }
  async function manageable(traits: string[]): Promise<string> {
    const n = await node("1.112", { name: `rb112-${++serial}` });
    expect(
      (await call("1.112", `/v1/nodes/${n.uuid}/traits`, { method: "PUT", body: { traits } })).status,
    ).toBe(204);
    await provisionThrough({ url: ctx.url, headers: at("1.112") }, n.uuid, [["manage", "manageable"]]);
    await released(ctx.url, n.uuid); // the test's clean comes next
    return n.uuid;
  }
  const clean = (version: string, uuid: string, runbook: string) =>
    call(version, `/v1/nodes/${uuid}/states/provision`, {
      method: "PUT",
      body: { target: "clean", runbook },
    });

  it("names beyond traits, a description, traits shown from 1.112; all refused or hidden below", async () => {
    const made = await runbook("1.112", { name: "nightly.fw-update_1", description: "firmware, nightly" });
    expect(made).toMatchObject({ name: "nightly.fw-update_1", description: "firmware, nightly", traits: [] });
    const old = await call("1.111", `/v1/runbooks/${made.uuid}`);
    expect(old.body).not.toHaveProperty("traits");
    expect(old.body).not.toHaveProperty("description");
    expect(old.body).toMatchObject({ name: "nightly.fw-update_1" });
    expect((await call("1.111", `/v1/runbooks/${made.uuid}?fields=traits`)).status).toBe(400);
    expect((await call("1.112", `/v1/runbooks/${made.uuid}?fields=traits`)).body).toMatchObject({
      traits: [],
    });
    // below 1.112 the name is a trait and there is no description (Ironic's RUNBOOK_SCHEMA)
    for (const body of [{ name: "lower-name" }, { name: "CUSTOM_D112", description: "x" }]) {
      const r = await call("1.111", "/v1/runbooks", { method: "POST", body: { steps: [LOG], ...body } });
      expect(r.status, JSON.stringify(body)).toBe(400);
    }
    // traits are never set on create or PATCH, only through /traits
    const withTraits = await call("1.112", "/v1/runbooks", {
      method: "POST",
      body: { name: "with-traits", steps: [LOG], traits: ["CUSTOM_A"] },
    });
    expect(withTraits.status).toBe(400);
    const patch = (version: string, body: unknown) =>
      call(version, `/v1/runbooks/${made.uuid}`, { method: "PATCH", body });
    expect((await patch("1.112", [{ op: "add", path: "/traits", value: ["CUSTOM_A"] }])).status).toBe(400);
    expect((await patch("1.111", [{ op: "replace", path: "/description", value: "y" }])).status).toBe(400);
    const described = await patch("1.112", [{ op: "replace", path: "/description", value: "weekly" }]);
    expect((described.body as Body).description).toBe("weekly");
    // Ironic patches with the 1.112 name schema at every version
    const renamed = await patch("1.111", [{ op: "replace", path: "/name", value: "renamed.by-old" }]);
    expect(renamed.status, JSON.stringify(renamed.body)).toBe(200);
    expect((await call("1.112", "/v1/runbooks/renamed.by-old")).status).toBe(200);
  });

  it("/traits: GET, PUT all or one, DELETE one or all; 404 below 1.112", async () => {
    const made = await runbook("1.112", { name: `traits-${++serial}` });
    const path = `/v1/runbooks/${made.uuid}/traits`;
    const early = await call("1.111", path);
    expect(early.status).toBe(404);
    expect(faultOf(early.body)).toBe("The API version does not allow runbook traits");
    expect((await call("1.111", path, { method: "PUT", body: { traits: [] } })).status).toBe(404);
    expect(
      (await call("1.112", path, { method: "PUT", body: { traits: ["CUSTOM_B", "CUSTOM_A", "CUSTOM_B"] } }))
        .status,
    ).toBe(204);
    expect(((await call("1.112", path)).body as { traits: string[] }).traits.sort()).toEqual([
      "CUSTOM_A",
      "CUSTOM_B",
    ]);
    const one = await call("1.112", `${path}/CUSTOM_C`, { method: "PUT" });
    expect(one.status).toBe(204);
    expect(one.headers.get("location")).toBe(`${ctx.url}${path}/CUSTOM_C`);
    expect((await call("1.112", `/v1/runbooks/${made.uuid}`)).body).toMatchObject({
      traits: expect.arrayContaining(["CUSTOM_A", "CUSTOM_B", "CUSTOM_C"]),
    });
    const both = await call("1.112", `${path}/CUSTOM_D`, { method: "PUT", body: { traits: ["CUSTOM_D"] } });
    expect(both.status).toBe(400);
    expect(faultOf(both.body)).toMatch(/^A single runbook trait may be added via PUT/);
    const neither = await call("1.112", path, { method: "PUT" });
    expect(faultOf(neither.body)).toBe(faultOf(both.body));
    const body = await call("1.112", `${path}/CUSTOM_D`, { method: "PUT", body: { other: 1 } });
    expect(faultOf(body.body)).toBe("No body should be provided when adding a trait");
    expect((await call("1.112", `${path}/lower_case`, { method: "PUT" })).status).toBe(400);
    expect((await call("1.112", `${path}/CUSTOM_A`, { method: "DELETE" })).status).toBe(204);
    // removing a trait the runbook lacks is no error (Ironic's)
    expect((await call("1.112", `${path}/CUSTOM_NOPE`, { method: "DELETE" })).status).toBe(204);
    expect(((await call("1.112", path)).body as { traits: string[] }).traits.sort()).toEqual([
      "CUSTOM_B",
      "CUSTOM_C",
    ]);
    expect((await call("1.112", path, { method: "DELETE" })).status).toBe(204);
    expect((await call("1.112", path)).body).toEqual({ traits: [] });
    expect((await call("1.112", "/v1/runbooks/no-such/traits")).status).toBe(404);
  });

  it("from 1.112 a node runs a runbook carrying one of its traits; older clients match by name", async () => {
    const named = await runbook("1.112", { name: "CUSTOM_BYNAME", steps: RAID });
    const uuid = await manageable(["CUSTOM_BYNAME", "CUSTOM_RACK_1"]);
    // a runbook without traits: runs by name for a 1.111 client, refused at 1.112
    const byName = await clean("1.111", uuid, named.uuid);
    expect(byName.status, JSON.stringify(byName.body)).toBe(202);
    await waitForState(ctx.url, uuid, "manageable");
    const none = await clean("1.112", uuid, named.uuid);
    expect(none.status).toBe(400);
    expect(faultOf(none.body)).toBe(
      `Runbook ${named.uuid} has no traits configured. Please ask an administrator to add traits to the runbook.`,
    );
    const byTrait = await runbook("1.112", { name: "rack-maintenance", steps: RAID });
    await call("1.112", `/v1/runbooks/${byTrait.uuid}/traits`, {
      method: "PUT",
      body: { traits: ["CUSTOM_RACK_2", "CUSTOM_RACK_1"] },
    });
    const ran = await clean("1.112", uuid, "rack-maintenance");
    expect(ran.status, JSON.stringify(ran.body)).toBe(202);
    expect((await waitForState(ctx.url, uuid, "manageable")).last_error).toBeNull();
    // the same runbook for a 1.111 client: its name is no trait of the node
    const old = await clean("1.111", uuid, byTrait.uuid);
    expect(faultOf(old.body)).toBe(
      `This runbook has not been approved for use on this node ${uuid}. Please ask an administrator to add it to your node traits.`,
    );
    const other = await manageable(["CUSTOM_RACK_9"]);
    const refused = await clean("1.112", other, byTrait.uuid);
    expect(refused.status).toBe(400);
    expect(faultOf(refused.body)).toBe(
      `This runbook has not been approved for use on this node ${other}. The node does not have any of the runbook's traits ['CUSTOM_RACK_1', 'CUSTOM_RACK_2']. Please ask an administrator to add a matching trait to your node.`,
    );
  });

  it("takes a generated name only when it is 1-255 unreserved characters: 201 or 400, never 5xx", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.string({ maxLength: 300 }), fc.stringMatching(/^[A-Za-z0-9._~-]{1,260}$/)),
        async (name) => {
          const r = await call("1.112", "/v1/runbooks", { method: "POST", body: { name, steps: [LOG] } });
          const valid = /^[A-Za-z0-9._~-]{1,255}$/.test(name);
          // a valid name that is taken (409) or that looks like a uuid is the only other answer
          if (r.status === 409) return;
          expect(r.status, name).toBe(valid ? 201 : 400);
          if (r.status === 201)
            await call("1.112", `/v1/runbooks/${(r.body as { uuid: string }).uuid}`, { method: "DELETE" });
        },
      ),
      { numRuns: 40 },
    );
  });
});

describe("firmware components' identity (1.114)", () => {
  it("takes vendor, model and serial_number in ?fields= from 1.114; below, Ironic's 400 naming them", async () => {
    const n = await node("1.114");
    const get = (version: string, query: string) =>
      api(`${ctx.url}/v1/nodes/${n.uuid}/firmware${query}`, { headers: at(version) });
    const early = await get("1.113", "?fields=component,vendor,serial_number");
    expect(early.status).toBe(400);
    expect(faultOf(early.body)).toBe(
      "Fields serial_number, vendor are not allowed in this API version. They require at least API version 1.114.",
    );
    expect((await get("1.113", "?fields=component,current_version")).status).toBe(200);
    const at114 = await get("1.114", "?fields=component,vendor,model,serial_number");
    expect(at114.status).toBe(200);
    // the no-firmware interface records no components, as Ironic's for such a node
    expect(at114.body).toEqual({ firmware: [] });
    expect((await get("1.85", "")).status).toBe(404);
  });
});
