import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, faultOf, startConductor, waitForState } from "../helpers/conductor.ts";
import { MAX_VERSION_STRING } from "../../conductor/api/microversion.ts";

let ctx: Awaited<ReturnType<typeof startConductor>>;
let nodeUuid = "";
let portUuid = "";

/** Everything the database holds, as text: rejected requests must leave it byte-identical. */
async function snapshot(): Promise<string> {
  const store = ctx.conductor.store;
  const nodes = await store.listNodes({}, {});
  const ports = await store.listPorts({}, {});
  const allocations = await store.listAllocations({}, {});
  return JSON.stringify({ nodes, ports, allocations });
}

beforeAll(async () => {
  ctx = await startConductor();
  const created = await api(`${ctx.url}/v1/nodes`, {
    method: "POST",
    body: { name: "n1", driver: "fake-hardware", driver_info: { ipmi_password: "pw" } },
  });
  nodeUuid = String((created.body as { uuid: string }).uuid);
  const port = await api(`${ctx.url}/v1/ports`, {
    method: "POST",
    body: { node_uuid: nodeUuid, address: "52:54:00:00:00:01" },
  });
  portUuid = String((port.body as { uuid: string }).uuid);
});
afterAll(async () => {
  await ctx.stop();
});

describe("bad input gets a 4xx in Ironic's envelope and changes nothing", () => {
  const cases: [
    string,
    { method: string; path: string; raw?: string; body?: unknown; headers?: Record<string, string> },
    number,
    RegExp | string,
  ][] = [
    [
      "malformed JSON",
      { method: "POST", path: "/v1/nodes", raw: '{"driver": "fake-hardware",' },
      400,
      /JSON/i,
    ],
    [
      "unknown field",
      { method: "POST", path: "/v1/nodes", body: { driver: "fake-hardware", colour: "red" } },
      400,
      /colour/,
    ],
    [
      "wrong type",
      { method: "POST", path: "/v1/nodes", body: { driver: "fake-hardware", properties: "big" } },
      400,
      /properties/,
    ],
    ["missing driver", { method: "POST", path: "/v1/nodes", body: { name: "x" } }, 400, /driver/],
    [
      "unknown driver",
      { method: "POST", path: "/v1/nodes", body: { driver: "nope" } },
      400,
      /No valid host was found/,
    ],
    [
      "duplicate name",
      { method: "POST", path: "/v1/nodes", body: { driver: "fake-hardware", name: "n1" } },
      409,
      /already exists/,
    ],
    [
      "unknown node",
      { method: "GET", path: "/v1/nodes/no-such-node" },
      404,
      /Node no-such-node could not be found/,
    ],
    [
      "illegal transition",
      { method: "PUT", path: "/v1/nodes/n1/states/provision", body: { target: "active" } },
      400,
      /can not be performed on node .* while it is in state "enroll"/,
    ],
    [
      "unknown verb",
      { method: "PUT", path: "/v1/nodes/n1/states/provision", body: { target: "explode" } },
      400,
      /target/,
    ],
    [
      "config drive with an unknown key",
      {
        method: "PUT",
        path: "/v1/nodes/n1/states/provision",
        body: { target: "manage", configdrive: { metadata: {} } },
      },
      400,
      /configdrive|metadata/,
    ],
    [
      "bad power target",
      { method: "PUT", path: "/v1/nodes/n1/states/power", body: { target: "power sideways" } },
      400,
      /target/,
    ],
    [
      "JSON Patch on an internal field",
      {
        method: "PATCH",
        path: "/v1/nodes/n1",
        body: [{ op: "replace", path: "/provision_state", value: "active" }],
      },
      400,
      /internal attribute/,
    ],
    [
      "JSON Patch with a bad op",
      { method: "PATCH", path: "/v1/nodes/n1", body: [{ op: "move", path: "/extra/a", from: "/extra/b" }] },
      400,
      /op|from/,
    ],
    [
      "JSON Patch not a list",
      { method: "PATCH", path: "/v1/nodes/n1", body: { op: "add", path: "/extra/a", value: 1 } },
      400,
      /array|expected/i,
    ],
    [
      "JSON Patch removing nothing",
      { method: "PATCH", path: "/v1/nodes/n1", body: [{ op: "remove", path: "/extra/nothing" }] },
      400,
      /non-existent/,
    ],
    [
      "bad MAC",
      {
        method: "POST",
        path: "/v1/ports",
        body: { node_uuid: "00000000-0000-4000-8000-000000000000", address: "zz:zz" },
      },
      400,
      /MAC/,
    ],
    [
      "bad field selection",
      { method: "GET", path: "/v1/nodes?fields=uuid,password_hash" },
      400,
      /password_hash/,
    ],
    ["unknown query parameter", { method: "GET", path: "/v1/nodes?colour=red" }, 400, /colour/],
    ["bad limit", { method: "GET", path: "/v1/nodes?limit=-3" }, 400, /limit/],
    [
      "allocation without class",
      { method: "POST", path: "/v1/allocations", body: { name: "a" } },
      400,
      /resource_class/,
    ],
    [
      "bad trait",
      { method: "PUT", path: "/v1/nodes/n1/traits", body: { traits: ["lower case"] } },
      400,
      /traits/,
    ],
    [
      "version above max",
      { method: "GET", path: "/v1/nodes", headers: { "X-OpenStack-Ironic-API-Version": "1.999" } },
      406,
      `supported version range is: [1.1, ${MAX_VERSION_STRING}]`,
    ],
    [
      "version malformed",
      { method: "GET", path: "/v1/nodes", headers: { "X-OpenStack-Ironic-API-Version": "abc" } },
      406,
      /Invalid value/,
    ],
    ["unknown path", { method: "GET", path: "/v1/chairs" }, 404, /could not be found/],
  ];

  it.each(cases)("%s", async (...[, request, status, message]) => {
    const before = await snapshot();
    const response = await api(`${ctx.url}${request.path}`, {
      method: request.method,
      raw: request.raw,
      body: request.body,
      headers: request.headers,
    });
    expect(response.status).toBe(status);
    expect(faultOf(response.body)).toMatch(message);
    expect(response.headers.get("x-openstack-ironic-api-maximum-version")).toBe(MAX_VERSION_STRING);
    expect(await snapshot()).toBe(before);
  });

  it("answers version negotiation like Ironic", async () => {
    const none = await api(`${ctx.url}/v1`, { headers: { "X-OpenStack-Ironic-API-Version": "" } });
    expect(none.headers.get("x-openstack-ironic-api-version")).toBe("1.1");
    const latest = await api(`${ctx.url}/v1/nodes`, {
      headers: { "X-OpenStack-Ironic-API-Version": "latest" },
    });
    expect(latest.headers.get("x-openstack-ironic-api-version")).toBe(MAX_VERSION_STRING);
    expect(latest.headers.get("x-openstack-ironic-api-minimum-version")).toBe("1.1");
    const old = await api(`${ctx.url}/v1/nodes/n1`, { headers: { "X-OpenStack-Ironic-API-Version": "1.1" } });
    expect(old.body).not.toHaveProperty("name");
    expect(old.body).not.toHaveProperty("resource_class");
    expect(old.body).toHaveProperty("driver_info", { ipmi_password: "******" });
  });

  it("gives 409 for a second action on a locked node", async () => {
    await ctx.conductor.store.reserveNode(nodeUuid, "other-conductor");
    const response = await api(`${ctx.url}/v1/nodes/n1/states/provision`, {
      method: "PUT",
      body: { target: "manage" },
    });
    expect(response.status).toBe(409);
    expect(faultOf(response.body)).toMatch(/locked by host other-conductor/);
    await ctx.conductor.store.releaseNode(nodeUuid, "other-conductor");
    const retried = await api(`${ctx.url}/v1/nodes/n1/states/provision`, {
      method: "PUT",
      body: { target: "manage" },
    });
    expect(retried.status).toBe(202);
    await waitForState(ctx.url, "n1", "manageable");
  });
});

describe("random bodies never crash the API", () => {
  const writes: { method: string; path: () => string }[] = [
    { method: "POST", path: () => "/v1/nodes" },
    { method: "PATCH", path: () => "/v1/nodes/n1" },
    { method: "PUT", path: () => "/v1/nodes/n1/states/provision" },
    { method: "PUT", path: () => "/v1/nodes/n1/states/power" },
    { method: "PUT", path: () => "/v1/nodes/n1/management/boot_device" },
    { method: "PUT", path: () => "/v1/nodes/n1/traits" },
    { method: "PUT", path: () => "/v1/nodes/n1/maintenance" },
    { method: "POST", path: () => "/v1/ports" },
    { method: "PATCH", path: () => `/v1/ports/${portUuid}` },
    { method: "POST", path: () => "/v1/allocations" },
    { method: "PATCH", path: () => "/v1/allocations/none" },
  ];

  // Bodies shaped like the real ones, with random values: they reach validation, not just the JSON parser.
  const fieldNames = fc.constantFrom(
    "driver",
    "name",
    "properties",
    "target",
    "op",
    "path",
    "value",
    "address",
    "node_uuid",
    "traits",
    "boot_device",
    "resource_class",
    "extra",
    "configdrive",
    "reason",
    "spec",
  );
  const value = fc.oneof(
    fc.jsonValue(),
    fc.constantFrom(
      "fake-hardware",
      "active",
      "manage",
      "/extra/x",
      "/name",
      "52:54:00:00:00:09",
      "add",
      "remove",
      "pxe",
    ),
  );
  const body = fc.oneof(
    fc.dictionary(fieldNames, value, { maxKeys: 4 }),
    fc.array(
      fc.record({ op: fc.constantFrom("add", "remove", "replace", "test"), path: fc.string(), value }),
      { maxLength: 3 },
    ),
    fc.jsonValue(),
  );

  it("sends a few hundred generated bodies to every write endpoint: no 5xx, and rejected ones change nothing", async () => {
    let sent = 0;
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...writes), body, async (endpoint, payload) => {
        const before = await snapshot();
        const response = await ctx.conductor.app.inject({
          method: endpoint.method as "POST",
          url: endpoint.path(),
          headers: { "content-type": "application/json", "x-openstack-ironic-api-version": "1.78" },
          payload: JSON.stringify(payload),
        });
        sent++;
        expect(response.statusCode).toBeLessThan(500);
        if (response.statusCode >= 400) {
          expect(faultOf(response.json())).not.toBe("");
          expect(await snapshot()).toBe(before);
        }
        await ctx.conductor.provisioner.settle();
      }),
      { numRuns: 400, seed: 20261122 },
    );
    expect(sent).toBe(400);
  });
});
