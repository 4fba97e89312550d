import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, faultOf, startConductor } from "../helpers/conductor.ts";

/** The deploy-log routes' answers without an agent: empty lists, Ironic's error envelope for what is wrong. */
describe("deploy logs API, no agent", () => {
  let ctx: Awaited<ReturnType<typeof startConductor>>;
  let never: Awaited<ReturnType<typeof startConductor>>;
  beforeAll(async () => {
    ctx = await startConductor();
    never = await startConductor({ deployLogs: { collect: "never" } });
    for (const c of [ctx, never])
      expect(
        (await api(`${c.url}/v1/nodes`, { method: "POST", body: { name: "n1", driver: "fake-hardware" } }))
          .status,
      ).toBe(201);
  });
  afterAll(async () => {
    await ctx.stop();
    await never.stop();
  });

  it("lists no logs for a node that has none", async () => {
    const answer = await api(`${ctx.url}/v1/nodes/n1/logs`);
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ logs: [] });
  });

  it("answers an unknown node, an unknown id and an unknown parameter in Ironic's envelope", async () => {
    const node = await api(`${ctx.url}/v1/nodes/nope/logs`);
    expect(node.status).toBe(404);
    expect(faultOf(node.body)).toMatch(/nope could not be found/);
    for (const id of ["x", "..%2F..%2Fetc%2Fpasswd", "a".repeat(300)]) {
      const log = await api(`${ctx.url}/v1/nodes/n1/logs/${id}`);
      expect(log.status).toBe(404);
      expect(faultOf(log.body)).toMatch(/could not be found/);
    }
    const format = await api(`${ctx.url}/v1/nodes/n1/logs/x?format=zip`);
    expect(format.status).toBe(400);
    const extra = await api(`${ctx.url}/v1/nodes/n1/logs?limit=1`);
    expect(extra.status).toBe(400);
    expect(faultOf(extra.body)).toMatch(/Unknown query parameter/);
  });

  it("refuses a collection with no agent connected (409), and any when collection is `never` (400)", async () => {
    const none = await api(`${ctx.url}/v1/nodes/n1/logs`, { method: "POST" });
    expect(none.status).toBe(409);
    expect(faultOf(none.body)).toMatch(/no agent connected/);
    const off = await api(`${never.url}/v1/nodes/n1/logs`, { method: "POST" });
    expect(off.status).toBe(400);
    expect(faultOf(off.body)).toMatch(/never/);
  });
});
