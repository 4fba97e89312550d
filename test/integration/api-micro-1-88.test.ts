import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, faultOf, startConductor } from "../helpers/conductor.ts";

/** 1.88, port names (Ironic's MINOR_88_PORT_NAME): refused and hidden below, unique and addressable at. */
let ctx: Awaited<ReturnType<typeof startConductor>>;
let node = "";
let macs = 0;
const at = (version: string) => ({ "X-OpenStack-Ironic-API-Version": version });
const nextMac = () =>
  `52:54:00:88:${Math.floor(macs / 256)
    .toString(16)
    .padStart(2, "0")}:${(macs++ % 256).toString(16).padStart(2, "0")}`;

const createPort = (version: string, body: Record<string, unknown>) =>
  api(`${ctx.url}/v1/ports`, {
    method: "POST",
    headers: at(version),
    body: { node_uuid: node, address: nextMac(), ...body },
  });

beforeAll(async () => {
  ctx = await startConductor({ fakeDelayMs: 0 });
  const made = await api(`${ctx.url}/v1/nodes`, { method: "POST", body: { driver: "fake-hardware" } });
  node = (made.body as { uuid: string }).uuid;
});
afterAll(async () => {
  await ctx?.stop();
});

describe("1.88 port name", () => {
  it("is a 406 below 1.88 in a create body (even null) and in ?fields=", async () => {
    for (const name of ["old-port", null]) {
      const r = await createPort("1.87", { name });
      expect(r.status).toBe(406);
      expect(faultOf(r.body)).toBe("Request not acceptable.");
    }
    const plain = await createPort("1.87", {});
    expect(plain.status).toBe(201);
    expect(plain.body).not.toHaveProperty("name");
    const uuid = (plain.body as { uuid: string }).uuid;
    for (const path of [
      `/v1/ports/${uuid}?fields=uuid,name`,
      "/v1/ports?fields=uuid,name",
      `/v1/nodes/${node}/ports?fields=uuid,name`,
    ]) {
      const r = await api(`${ctx.url}${path}`, { headers: at("1.87") });
      expect(r.status, path).toBe(406);
    }
    // older fields keep Ironic's gates too: is_smartnic is 1.53
    expect((await createPort("1.52", { is_smartnic: true })).status).toBe(406);
    const shown = await api(`${ctx.url}/v1/ports/${uuid}`, { headers: at("1.88") });
    expect(shown.body).toHaveProperty("name", null);
  });

  it("creates, shows, finds by name, patches and deletes a named port at 1.88", async () => {
    const r = await createPort("1.88", { name: "nic-0" });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    const uuid = (r.body as { uuid: string }).uuid;
    expect(r.body).toMatchObject({ name: "nic-0" });
    const byName = await api(`${ctx.url}/v1/ports/nic-0`, { headers: at("1.88") });
    expect(byName.status).toBe(200);
    expect(byName.body).toMatchObject({ uuid, name: "nic-0" });
    const fields = await api(`${ctx.url}/v1/ports/nic-0?fields=uuid,name`, { headers: at("1.88") });
    expect(Object.keys(fields.body as object).sort()).toEqual(["links", "name", "uuid"]);
    const listed = await api(`${ctx.url}/v1/ports/detail?node_uuid=${node}`, { headers: at("1.88") });
    expect((listed.body as { ports: { name: unknown }[] }).ports.map((p) => p.name)).toContain("nic-0");
    const hidden = await api(`${ctx.url}/v1/ports/${uuid}`, { headers: at("1.87") });
    expect(hidden.body).not.toHaveProperty("name");
    const renamed = await api(`${ctx.url}/v1/ports/nic-0`, {
      method: "PATCH",
      headers: at("1.88"),
      body: [{ op: "replace", path: "/name", value: "nic-1" }],
    });
    expect(renamed.status, JSON.stringify(renamed.body)).toBe(200);
    expect(renamed.body).toMatchObject({ uuid, name: "nic-1" });
    const gone = await api(`${ctx.url}/v1/ports/nic-0`, { headers: at("1.88") });
    expect(gone.status).toBe(404);
    expect(faultOf(gone.body)).toBe("Port nic-0 could not be found.");
    const removed = await api(`${ctx.url}/v1/ports/nic-1`, {
      method: "PATCH",
      headers: at("1.88"),
      body: [{ op: "remove", path: "/name" }],
    });
    expect(removed.body).toMatchObject({ uuid, name: null });
    expect((await api(`${ctx.url}/v1/ports/${uuid}`, { method: "DELETE", headers: at("1.88") })).status).toBe(
      204,
    );
  });

  it("keeps names unique with Ironic's 409 text, on create and on rename", async () => {
    expect((await createPort("1.88", { name: "dup" })).status).toBe(201);
    const again = await createPort("1.88", { name: "dup" });
    expect(again.status).toBe(409);
    expect(faultOf(again.body)).toBe("A port with name dup already exists.");
    const other = await createPort("1.88", { name: "other" });
    const clash = await api(`${ctx.url}/v1/ports/other`, {
      method: "PATCH",
      headers: at("1.88"),
      body: [{ op: "replace", path: "/name", value: "dup" }],
    });
    expect(clash.status).toBe(409);
    expect(faultOf(clash.body)).toBe("A port with name dup already exists.");
    expect((other.body as { name: string }).name).toBe("other");
    // unnamed ports do not collide
    expect((await createPort("1.88", { name: null })).status).toBe(201);
    expect((await createPort("1.88", {})).status).toBe(201);
  });

  it("answers any name body with 201, 400 or 409, never a 500, and a created name reads back", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.string({ maxLength: 300 }), fc.integer(), fc.constant(null)),
        async (name) => {
          const r = await createPort("1.88", { name });
          expect([201, 400, 409], JSON.stringify(r.body)).toContain(r.status);
          if (r.status === 201) {
            const uuid = (r.body as { uuid: string }).uuid;
            const back = await api(`${ctx.url}/v1/ports/${uuid}`, { headers: at("1.88") });
            expect((back.body as { name: unknown }).name).toBe(name);
          }
          if (typeof name === "string" && name.length > 255) expect(r.status).toBe(400);
        },
      ),
      { numRuns: 60 },
    );
  });
});
