import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runPowerSyncPass } from "../../conductor/cluster/power-sync.ts";
import { storePowerSyncPort } from "../../conductor/cluster/power-sync-port.ts";
import { MemoryMachine } from "../../scripts/lab/redfish/machine.ts";
import { startRedfishBmc, type RedfishBmc } from "../../scripts/lab/redfish/server.ts";
import {
  api,
  faultOf,
  powerOff,
  provisionThrough,
  released,
  startConductor,
  waitForState,
} from "../helpers/conductor.ts";
import { at, microApi, type Body } from "../helpers/micro-api.ts";

/**
 * 1.104–1.110 over real HTTP: node instance_name (1.104), OVN VTEP keys gone (1.105), port groups by shard
 * (1.106), X-OpenStack-Request-Id (1.107), servicing without the ramdisk (1.108), node health from the BMC
 * (1.109, through the power sync and the lab's Redfish BMC) and abort from `wait call-back` (1.110).
 */
let ctx: Awaited<ReturnType<typeof startConductor>>;
let bmc: RedfishBmc;
const { nextMac, node } = microApi(() => ctx.url, "52:54:01:04:00");

const show = async (uuid: string, version: string): Promise<Body> =>
  (await api(`${ctx.url}/v1/nodes/${uuid}`, { headers: at(version) })).body as Body;

const patch = (uuid: string, version: string, body: unknown) =>
  api(`${ctx.url}/v1/nodes/${uuid}`, { method: "PATCH", headers: at(version), body });

const provision = (uuid: string, version: string, body: Body) =>
  api(`${ctx.url}/v1/nodes/${uuid}/states/provision`, { method: "PUT", headers: at(version), body });

beforeAll(async () => {
  bmc = await startRedfishBmc({
    password: "bmc-s3cret",
    systems: [{ id: "node-1", machine: new MemoryMachine({ power: "Off" }) }],
  });
  ctx = await startConductor({ fakeDelayMs: 0 });
});
afterAll(async () => {
  await ctx?.stop();
  await bmc?.stop();
});

describe("instance_name (1.104)", () => {
  it("is created, shown from 1.104, patched, filtered on, and a 406 below", async () => {
    const made = await node("1.104", { instance_name: "web-1" });
    expect(made.instance_name).toBe("web-1");
    expect(await show(made.uuid, "1.103")).not.toHaveProperty("instance_name");
    const refused = await api(`${ctx.url}/v1/nodes`, {
      method: "POST",
      headers: at("1.103"),
      body: { driver: "fake-hardware", instance_name: "x" },
    });
    expect(refused.status).toBe(406);
    expect(
      (await patch(made.uuid, "1.103", [{ op: "replace", path: "/instance_name", value: "y" }])).status,
    ).toBe(406);
    const renamed = await patch(made.uuid, "1.104", [
      { op: "replace", path: "/instance_name", value: "web-2" },
    ]);
    expect(renamed.status, JSON.stringify(renamed.body)).toBe(200);
    const other = await node("1.104", { instance_name: "db-1" });
    const listed = await api(`${ctx.url}/v1/nodes?instance_name=web-2`, { headers: at("1.104") });
    expect((listed.body as { nodes: { uuid: string }[] }).nodes.map((n) => n.uuid)).toEqual([made.uuid]);
    expect(other.uuid).not.toBe(made.uuid);
    const early = await api(`${ctx.url}/v1/nodes?instance_name=web-2`, { headers: at("1.103") });
    expect(early.status).toBe(406);
    expect(faultOf(early.body)).toBe("instance_name is not acceptable in this API version");
  });

  it("takes instance_info's display_name when it has none (Nova), and keeps one it has", async () => {
    const bare = await node("1.104");
    const r = await patch(bare.uuid, "1.104", [
      { op: "add", path: "/instance_info/display_name", value: "from-nova" },
    ]);
    expect((r.body as Body).instance_name).toBe("from-nova");
    const named = await node("1.104", { instance_name: "kept" });
    const kept = await patch(named.uuid, "1.104", [
      { op: "add", path: "/instance_info/display_name", value: "other" },
    ]);
    expect((kept.body as Body).instance_name).toBe("kept");
  });

  it("refuses an empty or over-long name with a 400, never a 500", async () => {
    const n = await node("1.104");
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: 300 }), async (length) => {
        const res = await patch(n.uuid, "1.104", [
          { op: "add", path: "/instance_name", value: "n".repeat(length) },
        ]);
        expect(res.status).toBe(length >= 1 && length <= 255 ? 200 : 400);
      }),
      { numRuns: 25 },
    );
  });

  it("is cleared when the instance is torn down", async () => {
    const n = await node("1.104", { name: "mv104-td", instance_name: "gone-soon" });
    await provisionThrough({ url: ctx.url, headers: at("1.104") }, n.uuid, [
      ["manage", "manageable"],
      ["provide", "available"],
    ]);
    await powerOff(ctx.url, n.uuid);
    await provisionThrough({ url: ctx.url, headers: at("1.104") }, n.uuid, [["active", "active"]]);
    expect((await show(n.uuid, "1.104")).instance_name).toBe("gone-soon");
    await provisionThrough({ url: ctx.url, headers: at("1.104") }, n.uuid, [["deleted", "available"]]);
    expect((await show(n.uuid, "1.104")).instance_name).toBeNull();
  });
});

describe("1.105–1.107", () => {
  it("refuses OVN VTEP keys on a new port from 1.105", async () => {
    const n = await node("1.104");
    const create = (version: string) =>
      api(`${ctx.url}/v1/ports`, {
        method: "POST",
        headers: at(version),
        body: {
          address: nextMac(),
          node_uuid: n.uuid,
          local_link_connection: { "vtep-logical-switch": "ls" },
        },
      });
    expect((await create("1.104")).status).toBe(201);
    expect((await create("1.105")).status).toBe(406);
  });

  it("lists port groups by their nodes' shard from 1.106", async () => {
    const n = await node("1.106", { shard: "pg-shard-106" });
    const g = await api(`${ctx.url}/v1/portgroups`, {
      method: "POST",
      headers: at("1.106"),
      body: { node_uuid: n.uuid, address: nextMac() },
    });
    await api(`${ctx.url}/v1/portgroups`, {
      method: "POST",
      headers: at("1.106"),
      body: { node_uuid: (await node("1.106")).uuid, address: nextMac() },
    });
    const listed = await api(`${ctx.url}/v1/portgroups?shard=pg-shard-106`, { headers: at("1.106") });
    expect((listed.body as { portgroups: { uuid: string }[] }).portgroups.map((p) => p.uuid)).toEqual([
      (g.body as Body).uuid,
    ]);
    const early = await api(`${ctx.url}/v1/portgroups?shard=pg-shard-106`, { headers: at("1.105") });
    expect(early.status).toBe(406);
    expect(faultOf(early.body)).toBe(
      "Request not acceptable. The minimal required API version should be 1.106",
    );
  });

  it("answers X-OpenStack-Request-Id, the same id as OpenStack-Request-Id", async () => {
    const r = await api(`${ctx.url}/v1/nodes`, { headers: at("1.107") });
    expect(r.headers.get("x-openstack-request-id")).toBeTruthy();
    expect(r.headers.get("x-openstack-request-id")).toBe(r.headers.get("openstack-request-id"));
  });
});

describe("servicing without the ramdisk (1.108)", () => {
  it("runs a service step that needs no ramdisk with disable_ramdisk, a 406 below 1.108", async () => {
    const n = await node("1.108", { name: "mv108" });
    await provisionThrough({ url: ctx.url, headers: at("1.108") }, n.uuid, [
      ["manage", "manageable"],
      ["provide", "available"],
    ]);
    await powerOff(ctx.url, n.uuid);
    await provisionThrough({ url: ctx.url, headers: at("1.108") }, n.uuid, [["active", "active"]]);
    await released(ctx.url, n.uuid); // the service below needs the lock the deploy held
    const step = { interface: "vendor", step: "log_passthrough", args: {} };
    const early = await provision(n.uuid, "1.107", {
      target: "service",
      service_steps: [step],
      disable_ramdisk: true,
    });
    expect(early.status).toBe(406);
    const r = await provision(n.uuid, "1.108", {
      target: "service",
      service_steps: [step],
      disable_ramdisk: true,
    });
    expect(r.status, JSON.stringify(r.body)).toBe(202);
    await waitForState(ctx.url, n.uuid, "active");
    expect(await show(n.uuid, "1.108")).toMatchObject({ provision_state: "active", last_error: null });
  });
});

describe("node health (1.109)", () => {
  it("follows the Redfish BMC's Status.Health through the power sync, with a history entry", async () => {
    const made = await api(`${ctx.url}/v1/nodes`, {
      method: "POST",
      headers: at("1.109"),
      body: {
        driver: "redfish",
        name: "mv109",
        deploy_interface: "fake",
        driver_info: {
          redfish_address: bmc.url,
          redfish_system_id: "/redfish/v1/Systems/node-1",
          redfish_username: "admin",
          redfish_password: "bmc-s3cret",
        },
      },
    });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const uuid = (made.body as Body & { uuid: string }).uuid;
    expect((made.body as Body).health).toBeNull();
    await provisionThrough({ url: ctx.url, headers: at("1.109") }, uuid, [["manage", "manageable"]]);
    await released(ctx.url, uuid); // a sync pass skips a node still held
    const port = storePowerSyncPort(ctx.conductor.provisioner);
    const pass = () =>
      runPowerSyncPass(port, { concurrency: 1, forcePowerStateDuringSync: false, maxFailures: 3 });
    await pass();
    expect((await show(uuid, "1.109")).health).toBe("OK");
    expect(await show(uuid, "1.108")).not.toHaveProperty("health");
    bmc.systems.get("node-1")!.health = "Critical";
    await pass();
    expect((await show(uuid, "1.109")).health).toBe("Critical");
    const history = await api(`${ctx.url}/v1/nodes/${uuid}/history?detail=true`, { headers: at("1.109") });
    const events = (history.body as { history: { event: string; event_type: string }[] }).history;
    expect(events).toContainEqual(
      expect.objectContaining({
        event: "Node health status changed: health='Critical' (previously 'OK')",
        event_type: "monitoring",
      }),
    );
    // a BMC that reports something else is not a health report
    bmc.systems.get("node-1")!.health = "Unknown";
    await pass();
    expect((await show(uuid, "1.109")).health).toBeNull();
  });
});

describe("abort from wait call-back (1.110)", () => {
  it("is a 406 below 1.110 and lands in deploy failed from it", async () => {
    const n = await node("1.110", {
      name: "mv110",
      deploy_interface: "direct",
      automated_clean: false,
      instance_info: { image_source: "http://127.0.0.1:9/x.raw" },
    });
    const nic = await api(`${ctx.url}/v1/ports`, {
      method: "POST",
      body: { node_uuid: n.uuid, address: nextMac() },
    });
    expect(nic.status, JSON.stringify(nic.body)).toBe(201);
    await provisionThrough({ url: ctx.url, headers: at("1.110") }, n.uuid, [
      ["manage", "manageable"],
      ["provide", "available"],
    ]);
    await powerOff(ctx.url, n.uuid);
    const deploy = await provision(n.uuid, "1.110", { target: "active" });
    expect(deploy.status, JSON.stringify(deploy.body)).toBe(202);
    await waitForState(ctx.url, n.uuid, "wait call-back");
    const early = await provision(n.uuid, "1.109", { target: "abort" });
    expect(early.status).toBe(406);
    const r = await provision(n.uuid, "1.110", { target: "abort" });
    expect(r.status, JSON.stringify(r.body)).toBe(202);
    await waitForState(ctx.url, n.uuid, "deploy failed");
  });
});
