import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  api,
  faultOf,
  provisionThrough,
  released,
  startConductor,
  waitForState,
} from "../helpers/conductor.ts";

/** Microversion gates and refusals of the step and RAID API, over HTTP. */
describe("steps and RAID at their microversions", () => {
  let ctx: Awaited<ReturnType<typeof startConductor>>;
  const at = (version: string) => ({ "X-OpenStack-Ironic-API-Version": version });

  beforeAll(async () => {
    ctx = await startConductor();
    for (const body of [
      { driver: "fake-hardware", name: "v1" },
      { driver: "ipmi", name: "noraid" },
    ]) {
      const made = await api(`${ctx.url}/v1/nodes`, { method: "POST", body });
      expect(made.status, JSON.stringify(made.body)).toBe(201);
    }
    await provisionThrough(ctx.url, "v1", [["manage", "manageable"]]);
  });
  afterAll(async () => {
    await ctx.stop();
  });

  const provision = (body: Record<string, unknown>, version = "1.82") =>
    api(`${ctx.url}/v1/nodes/v1/states/provision`, { method: "PUT", body, headers: at(version) });

  it("refuses clean before 1.15, deploy_steps before 1.69, disable_ramdisk before 1.70 with 406", async () => {
    const steps = [{ interface: "raid", step: "delete_configuration" }];
    expect((await provision({ target: "clean", clean_steps: steps }, "1.14")).status).toBe(406);
    expect((await provision({ target: "active", deploy_steps: [] }, "1.68")).status).toBe(406);
    const old = await provision({ target: "clean", clean_steps: steps, disable_ramdisk: true }, "1.69");
    expect(old.status).toBe(406);
    expect(faultOf(old.body)).toContain("disable_ramdisk requires API version 1.70");
  });

  it("accepts a ramdisk-free manual clean with disable_ramdisk", async () => {
    const accepted = await provision({
      target: "clean",
      clean_steps: [{ interface: "raid", step: "delete_configuration" }],
      disable_ramdisk: true,
    });
    expect(accepted.status).toBe(202);
    await waitForState(ctx.url, "v1", "manageable");
    await released(ctx.url, "v1"); // the RAID test below reserves the node itself
  });

  it("shows clean_step and deploy_step only from their microversions", async () => {
    const old = (await api(`${ctx.url}/v1/nodes/v1`, { headers: at("1.6") })).body as Record<string, unknown>;
    expect(old).not.toHaveProperty("clean_step");
    const mid = (await api(`${ctx.url}/v1/nodes/v1`, { headers: at("1.43") })).body as Record<
      string,
      unknown
    >;
    expect(mid.clean_step).toEqual({});
    expect(mid).not.toHaveProperty("deploy_step");
    const states = (await api(`${ctx.url}/v1/nodes/v1/states`, { headers: at("1.11") })).body;
    expect(states).not.toHaveProperty("raid_config");
  });

  it("answers 404 for RAID on a node whose raid interface is no-raid, 409 while locked", async () => {
    const raid = { logical_disks: [{ size_gb: 10, raid_level: "1", controller: "software" }] };
    const none = await api(`${ctx.url}/v1/nodes/noraid/states/raid`, { method: "PUT", body: raid });
    expect(none.status).toBe(404);
    expect(faultOf(none.body)).toContain("does not support raid");
    const node = await ctx.conductor.store.getNode("v1");
    await ctx.conductor.store.reserveNode(node!.uuid, "someone-else");
    const locked = await api(`${ctx.url}/v1/nodes/v1/states/raid`, { method: "PUT", body: raid });
    expect(locked.status).toBe(409);
    await ctx.conductor.store.releaseNode(node!.uuid, "someone-else");
    const cleared = await api(`${ctx.url}/v1/nodes/v1/states/raid`, { method: "PUT", body: {} });
    expect(cleared.status).toBe(204);
  });

  it("accepts a hardware RAID target on the agent RAID interface, as Ironic's schema-only check", async () => {
    await api(`${ctx.url}/v1/nodes`, {
      method: "POST",
      body: {
        driver: "ipmi",
        name: "swraid",
        raid_interface: "agent",
        driver_info: { ipmi_address: "192.0.2.9" },
      },
    });
    // gophercloud's acceptance TestNodesRAIDConfig sends this one (no controller: a hardware RAID 5)
    const hardware = {
      logical_disks: [
        {
          size_gb: 100,
          is_root_volume: true,
          raid_level: "5",
          disk_type: "hdd",
          number_of_physical_disks: 5,
        },
      ],
    };
    const set = await api(`${ctx.url}/v1/nodes/swraid/states/raid`, { method: "PUT", body: hardware });
    expect(set.status).toBe(204);
    const level = { logical_disks: [{ size_gb: "MAX", raid_level: "5+0", controller: "software" }] };
    expect((await api(`${ctx.url}/v1/nodes/swraid/states/raid`, { method: "PUT", body: level })).status).toBe(
      204,
    );
    const states = await api(`${ctx.url}/v1/nodes/swraid/states`);
    expect(states.body).toMatchObject({ target_raid_config: level });
    // the schema still holds: an unknown level is Ironic's 400
    const bad = await api(`${ctx.url}/v1/nodes/swraid/states/raid`, {
      method: "PUT",
      body: { logical_disks: [{ size_gb: 10, raid_level: "7" }] },
    });
    expect(bad.status).toBe(400);
    expect(faultOf(bad.body)).toContain("RAID config validation error");
  });
});
