import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startConductor } from "../helpers/conductor.ts";

// What real Ironic 21.4 answered for the same raw requests (captured with the stock client).
const IRONIC_V1_KEYS_AT_1_1 = [
  "chassis",
  "drivers",
  "id",
  "links",
  "media_types",
  "nodes",
  "ports",
  "version",
];
const IRONIC_PORT_FIELDS_AT_1_1 = [
  "address",
  "created_at",
  "extra",
  "links",
  "node_uuid",
  "updated_at",
  "uuid",
];

let ctx: Awaited<ReturnType<typeof startConductor>>;
let portUuid: string;

beforeAll(async () => {
  ctx = await startConductor();
  const node = (await api(`${ctx.url}/v1/nodes`, { method: "POST", body: { driver: "fake-hardware" } }))
    .body as { uuid: string };
  const port = (
    await api(`${ctx.url}/v1/ports`, {
      method: "POST",
      body: { node_uuid: node.uuid, address: "52:54:00:00:00:01", name: "eth0" },
      headers: { "X-OpenStack-Ironic-API-Version": "latest" },
    })
  ).body as { uuid: string };
  portUuid = port.uuid;
});
afterAll(async () => {
  await ctx.stop();
});

describe("compatibility with Ironic 21.4's raw answers", () => {
  it("sends no microversion headers on GET / but a request id", async () => {
    const response = await fetch(`${ctx.url}/`);
    expect(response.status).toBe(200);
    expect([...response.headers.keys()].filter((h) => h.startsWith("x-openstack-ironic"))).toEqual([]);
    expect(response.headers.get("openstack-request-id")).toMatch(/^req-[0-9a-f-]{36}$/);
  });

  it("lists at the default microversion exactly the resources Ironic lists there", async () => {
    const response = await fetch(`${ctx.url}/v1`);
    expect(response.headers.get("x-openstack-ironic-api-version")).toBe("1.1");
    const body = (await response.json()) as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(IRONIC_V1_KEYS_AT_1_1);
  });

  it("gates the links of later resources by microversion", async () => {
    const at = async (version: string) =>
      Object.keys(
        (await api(`${ctx.url}/v1`, { headers: { "X-OpenStack-Ironic-API-Version": version } }))
          .body as object,
      );
    expect(await at("1.21")).not.toContain("lookup");
    expect(await at("1.22")).toContain("lookup");
    expect(await at("1.48")).not.toContain("conductors");
    expect(await at("1.49")).toContain("conductors");
    expect(await at("1.51")).not.toContain("allocations");
    expect(await at("1.52")).toContain("allocations");
    expect(await at("latest")).toEqual(expect.arrayContaining(["chassis", "nodes", "allocations", "events"]));
  });

  it("answers the chassis link with an empty collection, not a 404", async () => {
    const { status, body } = await api(`${ctx.url}/v1/chassis`);
    expect(status).toBe(200);
    expect(body).toEqual({ chassis: [] });
  });

  it("shows a port's fields only from the microversion that introduced them", async () => {
    const old = (
      await api(`${ctx.url}/v1/ports/${portUuid}`, { headers: { "X-OpenStack-Ironic-API-Version": "1.1" } })
    ).body as Record<string, unknown>;
    expect(Object.keys(old).sort()).toEqual(IRONIC_PORT_FIELDS_AT_1_1);
    const latest = (
      await api(`${ctx.url}/v1/ports/${portUuid}`, {
        headers: { "X-OpenStack-Ironic-API-Version": "latest" },
      })
    ).body as Record<string, unknown>;
    expect(latest).toHaveProperty("pxe_enabled");
    expect(latest).toHaveProperty("is_smartnic");
    // port names arrived in Ironic's 1.88: shown from it, hidden at 1.87
    expect(latest).toHaveProperty("name", "eth0");
    const before = (
      await api(`${ctx.url}/v1/ports/${portUuid}`, { headers: { "X-OpenStack-Ironic-API-Version": "1.87" } })
    ).body as Record<string, unknown>;
    expect(before).not.toHaveProperty("name");
  });
});
