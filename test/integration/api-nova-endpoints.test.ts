import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, faultOf, startConductor } from "../helpers/conductor.ts";
import { MAX_VERSION_STRING } from "../../conductor/api/microversion.ts";

/**
 * Raw requests to the endpoints Nova's driver calls, compared with Ironic's documented answers (api-ref):
 * status, the microversion headers, and the key sets of the bodies.
 */
let ctx: Awaited<ReturnType<typeof startConductor>>;
let node = "";
let otherNode = "";
const at = (version: string) => ({ "X-OpenStack-Ironic-API-Version": version });
const keys = (body: unknown): string[] => Object.keys(body as object).sort();

/** Ironic's portgroup detail at 1.26 and later (api-ref: baremetal-api-v1-portgroups). */
const PORTGROUP_DETAIL_KEYS = [
  ...["address", "created_at", "extra", "internal_info", "links", "mode", "name", "node_uuid"],
  ...["ports", "properties", "standalone_ports_supported", "updated_at", "uuid"],
].sort();

beforeAll(async () => {
  ctx = await startConductor({ fakeDelayMs: 0 });
  for (const name of ["nova-a", "nova-b"]) {
    const r = await api(`${ctx.url}/v1/nodes`, { method: "POST", body: { driver: "fake-hardware", name } });
    expect(r.status).toBe(201);
    if (name === "nova-a") node = (r.body as { uuid: string }).uuid;
    else otherNode = (r.body as { uuid: string }).uuid;
  }
});
afterAll(async () => {
  await ctx?.stop();
});

describe("port groups", () => {
  let pg = "";

  it("POST /v1/portgroups is 201 with Location and Ironic's detail keys; mode defaults", async () => {
    const r = await api(`${ctx.url}/v1/portgroups`, {
      method: "POST",
      body: { node_uuid: node, address: "52:54:00:AA:00:01", name: "bond0" },
    });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    const body = r.body as Record<string, unknown>;
    pg = body.uuid as string;
    expect(keys(body)).toEqual(PORTGROUP_DETAIL_KEYS);
    expect(body).toMatchObject({
      address: "52:54:00:aa:00:01",
      mode: "active-backup",
      standalone_ports_supported: true,
      node_uuid: node,
    });
    expect(r.headers.get("location")).toBe(`${ctx.url}/v1/portgroups/${pg}`);
    expect(r.headers.get("x-openstack-ironic-api-version")).toBe("1.78");
    expect(r.headers.get("x-openstack-ironic-api-minimum-version")).toBe("1.1");
    expect(r.headers.get("x-openstack-ironic-api-maximum-version")).toBe(MAX_VERSION_STRING);
  });

  it("lists: short keys by default, detail keys, ?node= and /v1/nodes/{id}/portgroups", async () => {
    const short = await api(`${ctx.url}/v1/portgroups`);
    expect(short.status).toBe(200);
    const [first] = (short.body as { portgroups: Record<string, unknown>[] }).portgroups;
    expect(keys(first)).toEqual(["address", "links", "name", "uuid"]);

    const detail = await api(`${ctx.url}/v1/portgroups/detail?node=${node}`);
    expect(detail.status).toBe(200);
    const groups = (detail.body as { portgroups: Record<string, unknown>[] }).portgroups;
    expect(groups.map((g) => g.uuid)).toEqual([pg]);
    expect(keys(groups[0])).toEqual(PORTGROUP_DETAIL_KEYS);

    const none = await api(`${ctx.url}/v1/portgroups/detail?node=nova-b`);
    expect((none.body as { portgroups: unknown[] }).portgroups).toEqual([]);

    const sub = await api(`${ctx.url}/v1/nodes/nova-a/portgroups`);
    expect(sub.status).toBe(200);
    expect((sub.body as { portgroups: { uuid: string }[] }).portgroups.map((g) => g.uuid)).toEqual([pg]);
    const subDetail = await api(`${ctx.url}/v1/nodes/nova-b/portgroups/detail`);
    expect(subDetail.body).toEqual({ portgroups: [] });
  });

  it("is 404 below 1.23 and hides mode and properties below 1.26", async () => {
    const old = await api(`${ctx.url}/v1/portgroups`, { headers: at("1.22") });
    expect(old.status).toBe(404);
    const v25 = await api(`${ctx.url}/v1/portgroups/${pg}`, { headers: at("1.25") });
    expect(v25.status).toBe(200);
    expect(keys(v25.body)).toEqual(PORTGROUP_DETAIL_KEYS.filter((k) => k !== "mode" && k !== "properties"));
    const byName = await api(`${ctx.url}/v1/portgroups/bond0`);
    expect((byName.body as { uuid: string }).uuid).toBe(pg);
  });

  it("answers Ironic's texts for a duplicate, a bad name, a missing node and a missing group", async () => {
    const dup = await api(`${ctx.url}/v1/portgroups`, {
      method: "POST",
      body: { node_uuid: node, address: "52:54:00:aa:00:01" },
    });
    expect(dup.status).toBe(409);
    expect(faultOf(dup.body)).toBe("A portgroup with MAC address 52:54:00:aa:00:01 already exists.");
    const badName = await api(`${ctx.url}/v1/portgroups`, {
      method: "POST",
      body: { node_uuid: node, name: "has space" },
    });
    expect(badName.status).toBe(400);
    expect(faultOf(badName.body)).toBe("Cannot create portgroup with invalid name 'has space'");
    const missingNode = "00000000-0000-4000-8000-00000000dead";
    const noNode = await api(`${ctx.url}/v1/portgroups`, {
      method: "POST",
      body: { node_uuid: missingNode },
    });
    expect(noNode.status).toBe(400);
    expect(faultOf(noNode.body)).toBe(`Node ${missingNode} could not be found.`);
    const gone = await api(`${ctx.url}/v1/portgroups/${missingNode}`);
    expect(gone.status).toBe(404);
    expect(faultOf(gone.body)).toBe(`Portgroup ${missingNode} could not be found.`);
  });

  it("ports join a group on their node only; a group with ports is not deleted", async () => {
    const foreign = await api(`${ctx.url}/v1/ports`, {
      method: "POST",
      body: { node_uuid: otherNode, address: "52:54:00:aa:00:09", portgroup_uuid: pg },
    });
    expect(foreign.status).toBe(400);
    expect(faultOf(foreign.body)).toBe("Port can not be added to a portgroup belonging to a different node.");
    const port = await api(`${ctx.url}/v1/ports`, {
      method: "POST",
      body: { node_uuid: node, address: "52:54:00:aa:00:02", portgroup_uuid: pg },
    });
    expect(port.status).toBe(201);
    const members = await api(`${ctx.url}/v1/portgroups/${pg}/ports`);
    expect(members.status).toBe(200);
    expect((members.body as { ports: { address: string }[] }).ports.map((p) => p.address)).toEqual([
      "52:54:00:aa:00:02",
    ]);
    const filtered = await api(`${ctx.url}/v1/ports?portgroup=${pg}`);
    expect((filtered.body as { ports: unknown[] }).ports).toHaveLength(1);
    const refused = await api(`${ctx.url}/v1/portgroups/${pg}`, { method: "DELETE" });
    expect(refused.status).toBe(400);
    expect(faultOf(refused.body)).toBe(
      `Cannot complete the requested action because portgroup ${pg} contains ports.`,
    );
    const portUuid = (port.body as { uuid: string }).uuid;
    expect((await api(`${ctx.url}/v1/ports/${portUuid}`, { method: "DELETE" })).status).toBe(204);
  });

  it("PATCH changes fields; DELETE of an empty group is 204 and then 404", async () => {
    const patched = await api(`${ctx.url}/v1/portgroups/${pg}`, {
      method: "PATCH",
      body: [
        { op: "replace", path: "/mode", value: "802.3ad" },
        { op: "add", path: "/properties/miimon", value: "100" },
      ],
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect(patched.body).toMatchObject({ mode: "802.3ad", properties: { miimon: "100" } });
    expect((await api(`${ctx.url}/v1/portgroups/${pg}`, { method: "DELETE" })).status).toBe(204);
    expect((await api(`${ctx.url}/v1/portgroups/${pg}`)).status).toBe(404);
  });
});

describe("VIFs", () => {
  const vifs = async (ident: string) =>
    ((await api(`${ctx.url}/v1/nodes/${ident}/vifs`)).body as { vifs: { id: string }[] }).vifs.map(
      (v) => v.id,
    );
  const attach = (ident: string, body: unknown, version = "1.78") =>
    api(`${ctx.url}/v1/nodes/${ident}/vifs`, { method: "POST", body, headers: at(version) });

  it("needs a free port: 400 with Ironic's text on a node without one", async () => {
    const r = await attach("nova-b", { id: "vif-none" });
    expect(r.status).toBe(400);
    expect(faultOf(r.body)).toBe("Unable to attach VIF vif-none, not enough free physical ports.");
  });

  it("attaches to the PXE port first, lists, refuses a duplicate, detaches", async () => {
    const quiet = await api(`${ctx.url}/v1/ports`, {
      method: "POST",
      body: { node_uuid: otherNode, address: "52:54:00:bb:00:01", pxe_enabled: false },
    });
    const pxe = await api(`${ctx.url}/v1/ports`, {
      method: "POST",
      body: { node_uuid: otherNode, address: "52:54:00:bb:00:02" },
    });
    expect([quiet.status, pxe.status]).toEqual([201, 201]);
    const first = await attach("nova-b", { id: "vif-1" });
    expect(first.status, JSON.stringify(first.body)).toBe(204);
    expect(first.headers.get("x-openstack-ironic-api-version")).toBe("1.78");
    const pxeUuid = (pxe.body as { uuid: string }).uuid;
    const port = await api(`${ctx.url}/v1/ports/${pxeUuid}`);
    expect((port.body as { internal_info: unknown }).internal_info).toEqual({ tenant_vif_port_id: "vif-1" });
    expect(await vifs("nova-b")).toEqual(["vif-1"]);

    const dup = await attach("nova-b", { id: "vif-1" });
    expect(dup.status).toBe(409);
    expect(faultOf(dup.body)).toBe(
      `Unable to attach VIF because VIF vif-1 is already attached to Ironic Port ${pxeUuid}`,
    );
    expect((await attach("nova-b", { id: "vif-2" })).status).toBe(204);
    const full = await attach("nova-b", { id: "vif-3" });
    expect(full.status).toBe(400);
    expect((await vifs("nova-b")).sort()).toEqual(["vif-1", "vif-2"]);

    const gone = await api(`${ctx.url}/v1/nodes/nova-b/vifs/vif-1`, { method: "DELETE" });
    expect(gone.status).toBe(204);
    expect(await vifs("nova-b")).toEqual(["vif-2"]);
    const again = await api(`${ctx.url}/v1/nodes/nova-b/vifs/vif-1`, { method: "DELETE" });
    expect(again.status).toBe(400);
    expect(faultOf(again.body)).toBe(
      `Unable to detach VIF vif-1 from node ${otherNode} because it is not attached to it.`,
    );
    expect((await api(`${ctx.url}/v1/nodes/nova-b/vifs/vif-2`, { method: "DELETE" })).status).toBe(204);
  });

  it("is 404 below 1.28; port_uuid needs 1.67; both targets is 400", async () => {
    expect((await api(`${ctx.url}/v1/nodes/nova-b/vifs`, { headers: at("1.27") })).status).toBe(404);
    const early = await attach("nova-b", { id: "v", port_uuid: node }, "1.66");
    expect(early.status).toBe(400);
    const both = await attach("nova-b", { id: "v", port_uuid: node, portgroup_uuid: node });
    expect(both.status).toBe(400);
    expect(faultOf(both.body)).toBe("Cannot specify both port_uuid and portgroup_uuid");
  });

  it("the noop network interface records nothing", async () => {
    const patched = await api(`${ctx.url}/v1/nodes/nova-b`, {
      method: "PATCH",
      body: [{ op: "replace", path: "/network_interface", value: "noop" }],
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect((await attach("nova-b", { id: "vif-noop" })).status).toBe(204);
    expect(await vifs("nova-b")).toEqual([]);
  });
});

describe("inject_nmi", () => {
  it("is 204 through the fake management interface at 1.29, 404 before", async () => {
    const path = `${ctx.url}/v1/nodes/nova-a/management/inject_nmi`;
    expect((await api(path, { method: "PUT", body: {}, headers: at("1.28") })).status).toBe(404);
    const r = await api(path, { method: "PUT", body: {}, headers: at("1.29") });
    expect(r.status, JSON.stringify(r.body)).toBe(204);
    expect(r.headers.get("x-openstack-ironic-api-version")).toBe("1.29");
    const missing = await api(`${ctx.url}/v1/nodes/no-such-node/management/inject_nmi`, { method: "PUT" });
    expect(missing.status).toBe(404);
    expect(faultOf(missing.body)).toBe("Node no-such-node could not be found.");
  });
});

describe("differences clients hit", () => {
  it("a node created below 1.11 starts available; from 1.11 in enroll", async () => {
    const old = await api(`${ctx.url}/v1/nodes`, {
      method: "POST",
      body: { driver: "fake-hardware" },
      headers: at("1.10"),
    });
    expect(old.status).toBe(201);
    expect((old.body as { provision_state: string }).provision_state).toBe("available");
    const current = await api(`${ctx.url}/v1/nodes`, {
      method: "POST",
      body: { driver: "fake-hardware" },
      headers: at("1.11"),
    });
    expect((current.body as { provision_state: string }).provision_state).toBe("enroll");
  });

  it("retired on an available node is 409 with Ironic's text", async () => {
    const created = await api(`${ctx.url}/v1/nodes`, {
      method: "POST",
      body: { driver: "fake-hardware" },
      headers: at("1.10"),
    });
    const uuid = (created.body as { uuid: string }).uuid;
    const r = await api(`${ctx.url}/v1/nodes/${uuid}`, {
      method: "PATCH",
      body: [{ op: "replace", path: "/retired", value: true }],
    });
    expect(r.status).toBe(409);
    expect(faultOf(r.body)).toBe(
      `Node ${uuid} can not have 'retired' set in provision state 'available', the current state is 'available'`,
    );
    const enrolled = await api(`${ctx.url}/v1/nodes`, { method: "POST", body: { driver: "fake-hardware" } });
    const other = (enrolled.body as { uuid: string }).uuid;
    const ok = await api(`${ctx.url}/v1/nodes/${other}`, {
      method: "PATCH",
      body: [{ op: "replace", path: "/retired", value: true }],
    });
    expect(ok.status).toBe(200);
  });

  it("a malformed uuid is answered with Ironic's args.uuid text", async () => {
    const r = await api(`${ctx.url}/v1/portgroups`, { method: "POST", body: { node_uuid: "not-a-uuid" } });
    expect(r.status).toBe(400);
    expect(faultOf(r.body)).toBe("Expected UUID for node_uuid: not-a-uuid");
    const node = await api(`${ctx.url}/v1/nodes`, {
      method: "POST",
      body: { driver: "fake-hardware", uuid: "1234" },
    });
    expect(node.status).toBe(400);
    expect(faultOf(node.body)).toBe("Expected UUID for uuid: 1234");
  });
});
