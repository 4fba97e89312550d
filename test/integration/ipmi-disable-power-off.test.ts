import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  api,
  faultOf,
  provisionThrough,
  released,
  startConductor,
  waitForState,
} from "../helpers/conductor.ts";
import { startIpmiSim, type IpmiSim } from "../helpers/ipmi-sim.ts";
import { until } from "../helpers/wait.ts";

const V95 = { "X-OpenStack-Ironic-API-Version": "1.95" };

/** 1.95 `disable_power_off` on the ipmi hardware type against a real ipmi_sim: what reaches the BMC. */
describe("disable_power_off with ipmitool and ipmi_sim", () => {
  let sim: IpmiSim;
  let ctx: Awaited<ReturnType<typeof startConductor>>;

  beforeAll(async () => {
    sim = await startIpmiSim();
    ctx = await startConductor();
  }, 60_000);
  afterAll(async () => {
    await ctx?.stop();
    await sim?.stop();
  });

  it("refuses power off and soft power off with Ironic's 409; a reboot resets the BMC, never powers it off", async () => {
    const created = await api(`${ctx.url}/v1/nodes`, {
      method: "POST",
      headers: V95,
      body: { name: "kept-on", driver: "ipmi", driver_info: sim.driverInfo(), disable_power_off: true },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    await sim.setPower("on");
    await provisionThrough(ctx.url, "kept-on", [["manage", "manageable"]]);
    // the reboot below needs the lock the verification held
    await released(ctx.url, "kept-on");
    const managed = await waitForState(ctx.url, "kept-on", "manageable");
    expect(managed.power_state).toBe("power on");
    const before = (await sim.events()).length;
    for (const target of ["power off", "soft power off"]) {
      const r = await api(`${ctx.url}/v1/nodes/kept-on/states/power`, {
        method: "PUT",
        headers: V95,
        body: { target },
      });
      expect(r.status).toBe(409);
      expect(faultOf(r.body)).toBe(`Failed to set node power state to ${target}.`);
    }
    const reboot = await api(`${ctx.url}/v1/nodes/kept-on/states/power`, {
      method: "PUT",
      headers: V95,
      body: { target: "rebooting" },
    });
    expect(reboot.status).toBe(202);
    await until(
      async () => {
        const node = (await api(`${ctx.url}/v1/nodes/kept-on`)).body as Record<string, unknown>;
        return node.target_power_state === null ? node : undefined;
      },
      { what: "the reboot to settle" },
    );
    const events = (await sim.events()).slice(before);
    expect(events.some((e) => e.startsWith("reset") || e === "power 1")).toBe(true);
    expect(events.filter((e) => e === "power 0" || e.startsWith("shutdown"))).toEqual([]);
    expect(await sim.power()).toBe("on");
    // room for the waits' own 60 s to name what they waited for
  }, 120_000);
});
