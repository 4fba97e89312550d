import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sampleInventory } from "../helpers/agent.ts";
import { api, faultOf, provisionThrough, startConductor, waitForState } from "../helpers/conductor.ts";

/**
 * Raw requests for each microversion after 1.82, one block per version: the change is absent or refused
 * below it with Ironic's answer, and present and working at it (api-ref and Ironic's controllers).
 */
let ctx: Awaited<ReturnType<typeof startConductor>>;
const at = (version: string) => ({ "X-OpenStack-Ironic-API-Version": version });
const keys = (body: unknown): string[] => Object.keys(body as object).sort();
const uuidOf = (body: unknown): string => (body as { uuid: string }).uuid;

async function createNode(version: string, body: Record<string, unknown> = {}) {
  return api(`${ctx.url}/v1/nodes`, {
    method: "POST",
    headers: at(version),
    body: { driver: "fake-hardware", ...body },
  });
}

async function listUuids(query: string, version = "1.83"): Promise<string[]> {
  const r = await api(`${ctx.url}/v1/nodes${query}`, { headers: at(version) });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return (r.body as { nodes: { uuid: string }[] }).nodes.map((n) => n.uuid);
}

beforeAll(async () => {
  ctx = await startConductor({ fakeDelayMs: 0 });
});
afterAll(async () => {
  await ctx?.stop();
});

describe("1.83 child nodes", () => {
  let parent = "";
  let child = "";

  it("is refused below 1.83: parent_node on create, the filters, the children endpoint", async () => {
    const made = await createNode("1.83", { name: "mv-parent" });
    expect(made.status).toBe(201);
    parent = uuidOf(made.body);
    const tooOld = await createNode("1.82", { parent_node: parent });
    expect(tooOld.status).toBe(406);
    expect(faultOf(tooOld.body)).toBe("Request not acceptable.");
    // null is no value: Ironic lets an older client send it
    expect((await createNode("1.82", { parent_node: null })).status).toBe(201);
    for (const query of [`?parent_node=${parent}`, "?include_children=true"]) {
      const r = await api(`${ctx.url}/v1/nodes${query}`, { headers: at("1.82") });
      expect(r.status).toBe(406);
      expect(faultOf(r.body)).toBe("Request not acceptable. The minimal required API version should be 1.83");
    }
    const children = await api(`${ctx.url}/v1/nodes/${parent}/children`, { headers: at("1.82") });
    expect(children.status).toBe(404);
    expect(faultOf(children.body)).toBe("Resource could not be found.");
    const shown = await api(`${ctx.url}/v1/nodes/${parent}`, { headers: at("1.82") });
    expect(shown.body).not.toHaveProperty("parent_node");
    const patched = await api(`${ctx.url}/v1/nodes/${parent}`, {
      method: "PATCH",
      headers: at("1.82"),
      body: [{ op: "add", path: "/parent_node", value: parent }],
    });
    expect(patched.status).toBe(406);
  });

  it("creates a child naming its parent by name and stores the parent's uuid", async () => {
    const r = await createNode("1.83", { name: "mv-child", parent_node: "mv-parent" });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    child = uuidOf(r.body);
    expect(r.body).toMatchObject({ parent_node: parent });
    const plain = await api(`${ctx.url}/v1/nodes/${parent}`, { headers: at("1.83") });
    expect(plain.body).toHaveProperty("parent_node", null);
    const fields = await api(`${ctx.url}/v1/nodes/${child}?fields=uuid,parent_node`, { headers: at("1.83") });
    expect(keys(fields.body)).toEqual(["links", "parent_node", "uuid"]);
  });

  it("lists children only when asked: by parent, or with include_children", async () => {
    const all = await listUuids("");
    expect(all).toContain(parent);
    expect(all).not.toContain(child);
    expect(await listUuids("/detail")).not.toContain(child);
    expect(await listUuids("?fields=uuid,name")).not.toContain(child);
    // older clients see the same list: Ironic leaves children out at every version
    expect(await listUuids("", "1.1")).not.toContain(child);
    expect(await listUuids(`?parent_node=${parent}`)).toEqual([child]);
    const included = await listUuids("?include_children=true");
    expect(included).toEqual(expect.arrayContaining([parent, child]));
    expect(await listUuids("?include_children=false")).not.toContain(child);
  });

  it("GET /v1/nodes/{id}/children answers Ironic's shape", async () => {
    const r = await api(`${ctx.url}/v1/nodes/mv-parent/children`, { headers: at("1.83") });
    expect(r.status).toBe(200);
    expect(keys(r.body)).toEqual(["children", "links"]);
    expect(r.body).toEqual({
      children: [child],
      links: { href: `${ctx.url}/v1/nodes?parent_node=${parent}`, rel: "children" },
    });
    const none = await api(`${ctx.url}/v1/nodes/${child}/children`, { headers: at("1.83") });
    expect(none.body).toMatchObject({ children: [] });
    const missing = await api(`${ctx.url}/v1/nodes/no-such-node/children`, { headers: at("1.83") });
    expect(missing.status).toBe(404);
  });

  it("PATCH sets, refuses and removes parent_node with Ironic's text", async () => {
    const other = uuidOf((await createNode("1.83")).body);
    const patch = (value: unknown, op = "add") =>
      api(`${ctx.url}/v1/nodes/${other}`, {
        method: "PATCH",
        headers: at("1.83"),
        body: [{ op, path: "/parent_node", ...(op === "remove" ? {} : { value }) }],
      });
    for (const bad of ["no-such-node", other]) {
      const r = await patch(bad);
      expect(r.status).toBe(400);
      expect(faultOf(r.body)).toBe(
        `Unable to apply the requested parent_node '${bad}'. Requested value was invalid.`,
      );
    }
    const set = await patch("mv-parent");
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    expect(set.body).toHaveProperty("parent_node", parent);
    expect(await listUuids(`?parent_node=${parent}`)).toEqual(expect.arrayContaining([child, other]));
    const removed = await patch(undefined, "remove");
    expect(removed.body).toHaveProperty("parent_node", null);
    expect(await listUuids("")).toContain(other);
  });

  it("a parent of another owner is refused with the same text as a missing one", async () => {
    const owned = await createNode("1.83", { owner: "project-a" });
    const r = await createNode("1.83", { owner: "project-b", parent_node: uuidOf(owned.body) });
    expect(r.status).toBe(400);
    expect(faultOf(r.body)).toBe(
      `Unable to apply the requested parent_node '${uuidOf(owned.body)}'. Requested value was invalid.`,
    );
  });
});

describe("1.84 continue_inspection", () => {
  const MAC = "52:54:00:84:00:01";
  let uuid = "";
  const post = (version: string, body: unknown, query = "") =>
    api(`${ctx.url}/v1/continue_inspection${query}`, { method: "POST", headers: at(version), body });
  const provision = (target: string) =>
    api(`${ctx.url}/v1/nodes/${uuid}/states/provision`, {
      method: "PUT",
      headers: at("1.84"),
      body: { target },
    });

  beforeAll(async () => {
    const made = await createNode("1.84", { name: "mv-inspect", inspect_interface: "agent" });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    uuid = uuidOf(made.body);
    const port = await api(`${ctx.url}/v1/ports`, {
      method: "POST",
      body: { node_uuid: uuid, address: MAC },
    });
    expect(port.status).toBe(201);
  });

  it("is a 404 between 1.2 and 1.83, with Ironic's text", async () => {
    const r = await post("1.83", { inventory: sampleInventory({ macs: [MAC] }) });
    expect(r.status).toBe(404);
    expect(faultOf(r.body)).toBe("API version 1.84 or newer is required");
    const byUuid = await post("1.1", { inventory: sampleInventory({ macs: [MAC] }) }, `?node_uuid=${uuid}`);
    expect(byUuid.status).toBe(404);
  });

  it("refuses bad data with a 400 and a node not waiting for inspection with a 404", async () => {
    const empty = await post("1.84", { inventory: { interfaces: [] } });
    expect(empty.status).toBe(400);
    const noKeys = await post("1.84", { inventory: { interfaces: [{ mac_address: "not-a-mac" }] } });
    expect(noKeys.status).toBe(400);
    expect(faultOf(noKeys.body)).toBe("No lookup information provided");
    const enrolled = await post("1.84", { inventory: sampleInventory({ macs: [MAC] }) });
    expect(enrolled.status).toBe(404);
    expect(faultOf(enrolled.body)).toBe("Resource could not be found.");
    const unknown = await post("1.84", { inventory: sampleInventory({ macs: ["52:54:00:84:ff:ff"] }) });
    expect(unknown.status).toBe(404);
  });

  it("continues an inspection in inspect wait from a ramdisk's data: 202 and the lookup shape", async () => {
    expect((await provision("manage")).status).toBe(202);
    await waitForState(ctx.url, uuid, "manageable");
    expect((await provision("inspect")).status).toBe(202);
    await waitForState(ctx.url, uuid, "inspect wait");
    const inventory = sampleInventory({ macs: [MAC] });
    const r = await post("1.84", { inventory, collector: "ipa" });
    expect(r.status, JSON.stringify(r.body)).toBe(202);
    expect(keys(r.body)).toEqual(["config", "node"]);
    expect((r.body as { node: { uuid: string } }).node.uuid).toBe(uuid);
    await waitForState(ctx.url, uuid, "manageable");
    const node = await api(`${ctx.url}/v1/nodes/${uuid}`, { headers: at("1.84") });
    expect(node.body).toMatchObject({
      properties: { cpus: inventory.cpu.count, cpu_arch: inventory.cpu.architecture },
    });
    expect((node.body as { driver_internal_info: object }).driver_internal_info).not.toHaveProperty(
      "inspection_data_posted",
    );
    const stored = await api(`${ctx.url}/v1/nodes/${uuid}/inventory`, { headers: at("1.84") });
    expect(stored.body).toMatchObject({
      inventory: { cpu: inventory.cpu },
      plugin_data: { collector: "ipa" },
    });
    // done: the node is no longer waiting, so the same data is refused
    expect((await post("1.84", { inventory })).status).toBe(404);
  });

  it("answers ironic-inspector's shape at 1.1, and refuses once Anvil's agent holds the boot", async () => {
    await provisionThrough({ url: ctx.url, headers: at("1.84") }, uuid, [["inspect", "inspect wait"]]);
    await ctx.conductor.store.setAgentToken(uuid, { digest: "d", bootId: "b" });
    const taken = await post("1.84", { inventory: sampleInventory({ macs: [MAC] }) });
    expect(taken.status).toBe(404);
    await ctx.conductor.store.setAgentToken(uuid, null);
    const r = await post("1.1", { inventory: sampleInventory({ macs: [MAC] }) });
    expect(r.status, JSON.stringify(r.body)).toBe(202);
    expect(r.body).toEqual({ uuid });
    await waitForState(ctx.url, uuid, "manageable");
  });
});

describe("1.85 unhold verb", () => {
  it("is a 406 below 1.85 and releases a clean hold at 1.85", async () => {
    const uuid = uuidOf((await createNode("1.85", { name: "mv-hold" })).body);
    const provision = (version: string, body: Record<string, unknown>) =>
      api(`${ctx.url}/v1/nodes/${uuid}/states/provision`, { method: "PUT", headers: at(version), body });
    expect((await provision("1.85", { target: "manage" })).status).toBe(202);
    await waitForState(ctx.url, uuid, "manageable");
    const hold = await provision("1.85", {
      target: "clean",
      clean_steps: [{ interface: "deploy", step: "hold" }],
    });
    expect(hold.status, JSON.stringify(hold.body)).toBe(202);
    await waitForState(ctx.url, uuid, "clean hold");
    const old = await provision("1.84", { target: "unhold" });
    expect(old.status).toBe(406);
    expect(faultOf(old.body)).toBe("Request not acceptable.");
    const states = await api(`${ctx.url}/v1/nodes/${uuid}/states`, { headers: at("1.85") });
    expect(states.body).toMatchObject({ provision_state: "clean hold" });
    expect((await provision("1.85", { target: "unhold" })).status).toBe(202);
    await waitForState(ctx.url, uuid, "manageable");
  });
});

describe("1.86 firmware interface", () => {
  it("hides firmware_interface and the firmware list below 1.86, shows them at it", async () => {
    const refused = await createNode("1.85", { firmware_interface: "no-firmware" });
    expect(refused.status).toBe(406);
    const uuid = uuidOf((await createNode("1.86", { firmware_interface: "no-firmware" })).body);
    const old = await api(`${ctx.url}/v1/nodes/${uuid}`, { headers: at("1.85") });
    expect(old.body).not.toHaveProperty("firmware_interface");
    const now = await api(`${ctx.url}/v1/nodes/${uuid}`, { headers: at("1.86") });
    expect(now.body).toHaveProperty("firmware_interface", "no-firmware");
    const firmwareOld = await api(`${ctx.url}/v1/nodes/${uuid}/firmware`, { headers: at("1.85") });
    expect(firmwareOld.status).toBe(404);
    const firmware = await api(`${ctx.url}/v1/nodes/${uuid}/firmware`, { headers: at("1.86") });
    expect(firmware.status).toBe(200);
    expect(firmware.body).toEqual({ firmware: [] });
    const bad = await createNode("1.86", { firmware_interface: "redfish" });
    expect(bad.status).toBe(400);
    const patched = await api(`${ctx.url}/v1/nodes/${uuid}`, {
      method: "PATCH",
      headers: at("1.86"),
      body: [{ op: "replace", path: "/firmware_interface", value: "fake" }],
    });
    expect(patched.status).toBe(400);
  });

  it("drivers show the firmware interfaces from 1.86", async () => {
    const old = await api(`${ctx.url}/v1/drivers/fake-hardware`, { headers: at("1.85") });
    expect(old.body).not.toHaveProperty("default_firmware_interface");
    const now = await api(`${ctx.url}/v1/drivers/fake-hardware`, { headers: at("1.86") });
    expect(now.body).toMatchObject({
      default_firmware_interface: "no-firmware",
      enabled_firmware_interfaces: ["no-firmware"],
    });
  });
});
