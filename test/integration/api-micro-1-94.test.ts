import { randomUUID } from "node:crypto";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, faultOf, startConductor } from "../helpers/conductor.ts";

/** 1.94, a port created on a node named by uuid or name (Ironic's MINOR_94_PORT_NODENAME, `node_ident`). */
let ctx: Awaited<ReturnType<typeof startConductor>>;
let node = "";
let macs = 0;
const NAME = "rack1-node7";
const at = (version: string) => ({ "X-OpenStack-Ironic-API-Version": version });
const nextMac = () => `52:54:00:94:00:${(macs++ % 256).toString(16).padStart(2, "0")}`;

const createPort = (version: string, body: Record<string, unknown>) =>
  api(`${ctx.url}/v1/ports`, { method: "POST", headers: at(version), body: { address: nextMac(), ...body } });

beforeAll(async () => {
  ctx = await startConductor({ fakeDelayMs: 0 });
  const made = await api(`${ctx.url}/v1/nodes`, {
    method: "POST",
    body: { driver: "fake-hardware", name: NAME },
  });
  node = (made.body as { uuid: string }).uuid;
});
afterAll(async () => {
  await ctx?.stop();
});

describe("1.94 node_ident on port create", () => {
  it("puts the port on the node named by its name or its uuid", async () => {
    for (const ident of [NAME, node]) {
      const r = await createPort("1.94", { node_ident: ident });
      expect(r.status).toBe(201);
      expect(r.body).toMatchObject({ node_uuid: node });
      expect(r.body).not.toHaveProperty("node_ident");
    }
    const listed = await api(`${ctx.url}/v1/nodes/${NAME}/ports`, { headers: at("1.94") });
    expect((listed.body as { ports: unknown[] }).ports).toHaveLength(2);
  });

  it("is a 406 below 1.94; node_uuid still works there", async () => {
    const r = await createPort("1.93", { node_ident: NAME });
    expect(r.status).toBe(406);
    expect(faultOf(r.body)).toBe("Request not acceptable.");
    expect((await createPort("1.93", { node_uuid: node })).status).toBe(201);
  });

  it("takes exactly one of node_ident and node_uuid, with jsonschema's oneOf texts", async () => {
    const neither = await createPort("1.94", { address: "52:54:00:94:01:01" });
    expect(neither.status).toBe(400);
    expect(faultOf(neither.body)).toBe(
      "Schema error for port: {'address': '52:54:00:94:01:01'} is not valid under any of the given schemas",
    );
    const both = await createPort("1.94", { node_ident: NAME, node_uuid: node });
    expect(both.status).toBe(400);
    expect(faultOf(both.body)).toMatch(
      /^Schema error for port: \{.*\} is valid under each of \{'required': \['node_ident'\]\}, \{'required': \['node_uuid'\]\}$/,
    );
  });

  it("a node_ident naming no node is Ironic's 400 NodeNotFound; generated idents never 5xx", async () => {
    const missing = randomUUID();
    const r = await createPort("1.94", { node_ident: missing });
    expect(r.status).toBe(400);
    expect(faultOf(r.body)).toBe(`Node ${missing} could not be found.`);
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.string({ maxLength: 300 }), fc.integer(), fc.constant(null)),
        async (ident) => {
          const res = await createPort("1.94", { node_ident: ident });
          expect(res.status).toBeGreaterThanOrEqual(200);
          expect(res.status).toBeLessThan(500);
          if (res.status === 201) expect(res.body).toMatchObject({ node_uuid: node });
        },
      ),
      { numRuns: 60 },
    );
  });
});
