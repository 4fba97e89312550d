import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, powerSettled, startConductor } from "../helpers/conductor.ts";

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

describe("the default list, written by the database", () => {
  const SHORT = "uuid,instance_uuid,maintenance,power_state,provision_state,name";
  type Page = { nodes: Record<string, unknown>[]; next?: string };

  it("is the same document as the same fields asked for by name, page by page", async () => {
    const nodes = ((await api(`${ctx.url}/v1/nodes`)).body as Page).nodes;
    const maintenance = await api(`${ctx.url}/v1/nodes/${String(nodes[0]!.uuid)}/maintenance`, {
      method: "PUT",
      body: {},
    });
    expect(maintenance.status, JSON.stringify(maintenance.body)).toBe(202);
    const patched = await api(`${ctx.url}/v1/nodes/${String(nodes[1]!.uuid)}`, {
      method: "PATCH",
      body: [{ op: "add", path: "/instance_uuid", value: "5c6a2a9e-4f7c-4c55-9a3f-0d6b2c1e7a10" }],
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    for (const query of ["", "sort_key=name&sort_dir=desc", "resource_class=small", "sort_key=maintenance"]) {
      // the short list (no fields: the database writes it) against ?fields= (views built in JavaScript)
      let fast = `${ctx.url}/v1/nodes?limit=2&${query}`;
      let slow = `${ctx.url}/v1/nodes?limit=2&fields=${SHORT}&${query}`;
      for (let pages = 0; pages < 5; pages++) {
        const a = (await api(fast)).body as Page;
        const b = (await api(slow)).body as Page;
        expect(a.nodes).toEqual(b.nodes);
        if (pages === 0) expect(a.nodes.length).toBeGreaterThan(0);
        expect(a.next === undefined).toBe(b.next === undefined);
        if (a.next === undefined || b.next === undefined) break;
        expect(new URL(a.next).searchParams.get("marker")).toBe(new URL(b.next).searchParams.get("marker"));
        expect(new URL(a.next).searchParams.get("fields")).toBeNull();
        [fast, slow] = [a.next, b.next];
      }
    }
    const all = (await api(`${ctx.url}/v1/nodes`)).body as Page;
    expect(all.nodes.map((n) => n.maintenance)).toContain(true);
    expect(all.nodes.map((n) => n.instance_uuid)).toContain("5c6a2a9e-4f7c-4c55-9a3f-0d6b2c1e7a10");
  });

  it("writes the newest detail page from stored texts, the same as the view path's older page", async () => {
    const v = (version: string) => ({ headers: { "X-OpenStack-Ironic-API-Version": version } });
    const nodes = ((await api(`${ctx.url}/v1/nodes`)).body as Page).nodes;
    // writes through a PATCH (the whole document) and a reservation's edit (the database's)
    const patched = await api(`${ctx.url}/v1/nodes/${String(nodes[2]!.uuid)}`, {
      method: "PATCH",
      body: [{ op: "add", path: "/driver_info/ipmi_password", value: "pw" }],
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    const on = await api(`${ctx.url}/v1/nodes/${String(nodes[2]!.uuid)}/states/power`, {
      method: "PUT",
      body: { target: "power on" },
    });
    expect(on.status, JSON.stringify(on.body)).toBe(202);
    // landed and released before the pages are compared: a power task still running between the two reads
    // changes power_state, target_power_state and reservation under them
    await powerSettled(ctx.url, String(nodes[2]!.uuid), "power on");
    for (const query of ["limit=2", "detail=true&limit=2"]) {
      let fast = `${ctx.url}/v1/nodes${query.startsWith("detail") ? "" : "/detail"}?${query}`;
      let slow = fast;
      let seen = "";
      for (let pages = 0; pages < 3; pages++) {
        // 1.109 on, from the stored texts; 1.108 by the view path, the same but for health (new in 1.109)
        const a = (await api(fast, v("1.110"))).body as Page;
        const b = (await api(slow, v("1.108"))).body as Page;
        expect(a.nodes.map(({ health, ...rest }) => (expect(health).toBeNull(), rest))).toEqual(b.nodes);
        seen += JSON.stringify(a.nodes);
        expect(a.next === undefined).toBe(b.next === undefined);
        if (a.next === undefined || b.next === undefined) break;
        [fast, slow] = [a.next, b.next];
      }
      expect(seen).toContain('"ipmi_password":"******"');
      expect(seen).not.toContain('"pw"');
    }
  });

  it("keeps to the microversion: before 1.5 a node has no name", async () => {
    const old = (await api(`${ctx.url}/v1/nodes`, { headers: { "X-OpenStack-Ironic-API-Version": "1.1" } }))
      .body as Page;
    expect(old.nodes.length).toBe(3);
    for (const n of old.nodes) expect(n).not.toHaveProperty("name");
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
