import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, faultOf, startConductor } from "../helpers/conductor.ts";

/**
 * 1.111–1.115 over real HTTP: dynamic port group fields (1.111).
 */
let ctx: Awaited<ReturnType<typeof startConductor>>;
let macs = 0;
const at = (version: string) => ({ "X-OpenStack-Ironic-API-Version": version });
const nextMac = () => `52:54:01:11:00:${(macs++ % 256).toString(16).padStart(2, "0")}`;
type Body = Record<string, unknown>;

async function node(version: string, fields: Body = {}): Promise<Body & { uuid: string }> {
  const made = await api(`${ctx.url}/v1/nodes`, {
    method: "POST",
    headers: at(version),
    body: { driver: "fake-hardware", ...fields },
  });
  expect(made.status, JSON.stringify(made.body)).toBe(201);
  return made.body as Body & { uuid: string };
}

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
