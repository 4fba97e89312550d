// POST /v1/continue_inspection takes a ramdisk's data from anyone who can reach the API (Ironic's lookup
// policy): generated bodies, whole or mutated from a real inventory, get 202, 400 or 404 in Ironic's envelope,
// never a 5xx, and only a body that names the waiting node's MAC moves it on.
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sampleInventory } from "../helpers/agent.ts";
import { api, startConductor, waitForState } from "../helpers/conductor.ts";
import { hostileJson } from "../helpers/hostile.ts";

type Ctx = Awaited<ReturnType<typeof startConductor>>;

const MAC = "52:54:00:84:10:01";
const HEADERS = { "content-type": "application/json", "x-openstack-ironic-api-version": "1.84" };
const PROTO_NAMES = Object.getOwnPropertyNames(Object.prototype).sort();

let ctx: Ctx;
let uuid = "";

async function post(payload: string): Promise<{ status: number; body: string }> {
  const r = await ctx.conductor.app.inject({
    method: "POST",
    url: "/v1/continue_inspection",
    headers: HEADERS,
    payload,
  });
  return { status: r.statusCode, body: r.body };
}

/** A refusal in Ironic's envelope: `error_message` holds a JSON text with a non-empty `faultstring`. */
function expectEnvelope(body: string): void {
  const outer = JSON.parse(body) as { error_message?: unknown };
  expect(typeof outer.error_message).toBe("string");
  const inner = JSON.parse(outer.error_message as string) as { faultstring?: unknown };
  expect(typeof inner.faultstring).toBe("string");
  expect((inner.faultstring as string).length).toBeGreaterThan(0);
}

const provisionState = async () => (await ctx.conductor.store.getNode(uuid))?.provision_state;

beforeAll(async () => {
  ctx = await startConductor({ fakeDelayMs: 0 });
  const made = await api(`${ctx.url}/v1/nodes`, {
    method: "POST",
    headers: { "X-OpenStack-Ironic-API-Version": "1.84" },
    body: { driver: "fake-hardware", inspect_interface: "agent", name: "ci-hostile" },
  });
  expect(made.status).toBe(201);
  uuid = (made.body as { uuid: string }).uuid;
  const port = await api(`${ctx.url}/v1/ports`, { method: "POST", body: { node_uuid: uuid, address: MAC } });
  expect(port.status).toBe(201);
  for (const [target, state] of [
    ["manage", "manageable"],
    ["inspect", "inspect wait"],
  ] as const) {
    const r = await api(`${ctx.url}/v1/nodes/${uuid}/states/provision`, {
      method: "PUT",
      headers: { "X-OpenStack-Ironic-API-Version": "1.84" },
      body: { target },
    });
    expect(r.status).toBe(202);
    await waitForState(ctx.url, uuid, state);
  }
});
afterAll(async () => {
  await ctx?.stop();
});

/** Any JSON value, as a replacement for one field of an otherwise real inventory. */
const anyValue = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  fc.constantFrom(null, "", "__proto__", -1, 1e308, "52:54:00:84:10:0", "::1", "http://[::1]:623"),
);

/** A real inventory for another machine with one field (at any depth of the known keys) replaced. */
const mutatedInventory = fc
  .tuple(
    fc.constantFrom(
      ["interfaces"],
      ["interfaces", 0],
      ["interfaces", 0, "mac_address"],
      ["interfaces", 0, "name"],
      ["cpu"],
      ["cpu", "count"],
      ["memory"],
      ["memory", "physical_mb"],
      ["disks"],
      ["disks", 0, "size"],
      ["bmc_address"],
      ["bmc_v6address"],
      ["system_vendor"],
      ["boot"],
    ),
    anyValue,
  )
  .map(([path, value]) => {
    const inventory = structuredClone(sampleInventory({ macs: ["52:54:00:84:20:02"] })) as unknown as Record<
      string,
      unknown
    >;
    let at: Record<string | number, unknown> = inventory;
    for (const key of path.slice(0, -1)) {
      const next = at[key];
      if (typeof next !== "object" || next === null) return JSON.stringify({ inventory });
      at = next as Record<string | number, unknown>;
    }
    at[path[path.length - 1]!] = value;
    return JSON.stringify({ inventory });
  });

describe("POST /v1/continue_inspection with generated bodies", () => {
  it("answers 400 or 404 in Ironic's envelope, never a 5xx, and the waiting node stays waiting", async () => {
    let refusals = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          hostileJson,
          hostileJson.map((inv) => `{"inventory":${inv}}`),
          mutatedInventory,
          fc.string({ maxLength: 64 }),
        ),
        async (payload) => {
          const r = await post(payload);
          expect(r.status, r.body).toBeGreaterThanOrEqual(400);
          expect(r.status, r.body).toBeLessThan(500);
          expectEnvelope(r.body);
          refusals += 1;
        },
      ),
      { numRuns: 300 },
    );
    expect(refusals).toBe(300);
    expect(await provisionState()).toBe("inspect wait");
    expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(PROTO_NAMES);
  });

  it("moves the node on only for a valid inventory naming its MAC", async () => {
    const wrongField = JSON.stringify({
      inventory: { ...sampleInventory({ macs: [MAC] }), cpu: { count: "many" } },
    });
    const refused = await post(wrongField);
    expect(refused.status).toBe(400);
    expectEnvelope(refused.body);
    expect(await provisionState()).toBe("inspect wait");
    const accepted = await post(JSON.stringify({ inventory: sampleInventory({ macs: [MAC] }) }));
    expect(accepted.status, accepted.body).toBe(202);
    await waitForState(ctx.url, uuid, "manageable");
  });
});
