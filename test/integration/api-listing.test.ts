import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startConductor } from "../helpers/conductor.ts";

let ctx: Awaited<ReturnType<typeof startConductor>>;

beforeAll(async () => {
  ctx = await startConductor();
  for (const [name, rc] of [
    ["b", "small"],
    ["a", "large"],
    ["c", "small"],
  ]) {
    await api(`${ctx.url}/v1/nodes`, {
      method: "POST",
      body: { name, driver: "fake-hardware", resource_class: rc },
    });
  }
});
afterAll(async () => {
  await ctx.stop();
});

describe("listing nodes", () => {
  it("pages with limit and a next link that carries the query on", async () => {
    const first = (await api(`${ctx.url}/v1/nodes?limit=2&fields=name`)).body as {
      nodes: { name: string }[];
      next: string;
    };
    expect(first.nodes.map((n) => n.name)).toEqual(["b", "a"]);
    expect(first.next).toMatch(/fields=name/);
    expect(first.next).toMatch(/limit=2/);
    const second = (await api(first.next)).body as { nodes: { name: string }[]; next?: string };
    expect(second.nodes.map((n) => n.name)).toEqual(["c"]);
    expect(second.next).toBeUndefined();
  });

  it("sorts, filters and selects fields", async () => {
    const sorted = (await api(`${ctx.url}/v1/nodes?sort_key=name&sort_dir=desc&fields=name,resource_class`))
      .body as {
      nodes: Record<string, unknown>[];
    };
    expect(sorted.nodes.map((n) => n.name)).toEqual(["c", "b", "a"]);
    expect(Object.keys(sorted.nodes[0] ?? {}).sort()).toEqual(["links", "name", "resource_class"]);
    const small = (await api(`${ctx.url}/v1/nodes?resource_class=small`)).body as {
      nodes: { name: string }[];
    };
    expect(small.nodes.map((n) => n.name).sort()).toEqual(["b", "c"]);
    const detail = (await api(`${ctx.url}/v1/nodes/detail?provision_state=enroll&limit=1`)).body as {
      nodes: Record<string, unknown>[];
      next: string;
    };
    expect(detail.nodes[0]).toHaveProperty("driver_info");
    expect(detail.next).toContain("/v1/nodes/detail?");
  });
});

describe("metrics", () => {
  it("counts nodes by state and every request answered", async () => {
    const first = (await api(`${ctx.url}/metrics`)).body as string;
    expect(first).toContain('anvil_nodes{provision_state="enroll"} 3');
    const before = Number(/anvil_http_requests_total (\d+)/.exec(first)?.[1]);
    await api(`${ctx.url}/v1/nodes`);
    await api(`${ctx.url}/v1/drivers`);
    const after = Number(
      /anvil_http_requests_total (\d+)/.exec((await api(`${ctx.url}/metrics`)).body as string)?.[1],
    );
    expect(after - before).toBe(3); // two API calls and the first /metrics itself
  });
});
