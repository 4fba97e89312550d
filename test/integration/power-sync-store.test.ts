import { afterEach, describe, expect, it } from "vitest";
import { runPowerSyncPass } from "../../conductor/cluster/power-sync.ts";
import { storePowerSyncPort } from "../../conductor/cluster/power-sync-port.ts";
import { defaultConfig } from "../../conductor/config.ts";
import { driverRegistry } from "../../conductor/drivers/hardware-type.ts";
import { FakePower } from "../../conductor/drivers/power/fake.ts";
import { fakeHardware } from "../../conductor/drivers/registry.ts";
import type { PowerInterface } from "../../conductor/drivers/interfaces.ts";
import { api, provisionThrough, released, startConductor } from "../helpers/conductor.ts";
import { CountingPower } from "../helpers/counting-power.ts";

/** The power sync over the conductor's own database and drivers (the loop itself is tested against ipmi_sim). */
describe("power sync over the store", () => {
  let stop: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await stop?.();
    stop = undefined;
  });

  async function setup(power: PowerInterface) {
    const hw = { ...fakeHardware(defaultConfig()), power };
    const drivers = driverRegistry([hw]);
    const ctx = await startConductor({}, { drivers });
    stop = ctx.stop;
    const created = await api(`${ctx.url}/v1/nodes`, {
      method: "POST",
      body: { name: "ps", driver: "fake-hardware" },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const uuid = (created.body as { uuid: string }).uuid;
    await provisionThrough(ctx.url, "ps", [["manage", "manageable"]]);
    await released(ctx.url, "ps"); // a sync pass skips a node still held
    return { ctx, uuid, port: storePowerSyncPort(ctx.conductor.provisioner) };
  }

  it("restores the recorded state with force on, records the BMC's with force off", async () => {
    const power = new FakePower({ delayMs: 0, initial: "power off" });
    const { ctx, uuid, port } = await setup(power);
    expect((await ctx.conductor.store.getNode(uuid))?.power_state).toBe("power off");
    power.force(uuid, "power on"); // someone pressed the button
    await runPowerSyncPass(port, { concurrency: 2, forcePowerStateDuringSync: true, maxFailures: 3 });
    expect(power.stateOf(uuid)).toBe("power off");
    expect((await ctx.conductor.store.getNode(uuid))?.power_state).toBe("power off");
    power.force(uuid, "power on");
    await runPowerSyncPass(port, { concurrency: 2, forcePowerStateDuringSync: false, maxFailures: 3 });
    expect(power.stateOf(uuid)).toBe("power on");
    expect((await ctx.conductor.store.getNode(uuid))?.power_state).toBe("power on");
  });

  it("puts a node whose BMC keeps failing into maintenance after three passes", async () => {
    const power = new FakePower({ delayMs: 0 });
    let broken = false;
    const flaky: PowerInterface = {
      validate: (node) => power.validate(node),
      getPowerState: (node, options) =>
        broken ? Promise.reject(new Error("BMC unreachable")) : power.getPowerState(node, options),
      setPowerState: (node, target, options) => power.setPowerState(node, target, options),
      reboot: (node, options) => power.reboot(node, options),
    };
    const { ctx, uuid, port } = await setup(flaky);
    broken = true;
    for (let pass = 1; pass <= 3; pass++) {
      await runPowerSyncPass(port, { concurrency: 2, forcePowerStateDuringSync: true, maxFailures: 3 });
      const node = await ctx.conductor.store.getNode(uuid);
      expect(node?.maintenance).toBe(pass === 3);
    }
    const node = await ctx.conductor.store.getNode(uuid);
    expect(node?.maintenance_reason).toMatch(/power/i);
    expect(node?.fault).toBe("power failure");
  });

  it("never switches a node with disable_power_off (1.95): its record follows the BMC, force or not", async () => {
    const power = new CountingPower({ delayMs: 0, initial: "power off" });
    const { ctx, uuid, port } = await setup(power);
    const flagged = await api(`${ctx.url}/v1/nodes/ps`, {
      method: "PATCH",
      headers: { "X-OpenStack-Ironic-API-Version": "1.95" },
      body: [{ op: "replace", path: "/disable_power_off", value: true }],
    });
    expect(flagged.status).toBe(200);
    const before = power.of(uuid).length;
    power.force(uuid, "power on"); // the node came up behind the conductor's back: recorded off, BMC on
    const first = await runPowerSyncPass(port, {
      concurrency: 2,
      forcePowerStateDuringSync: true,
      maxFailures: 3,
    });
    expect(first.outcomes.recorded).toBe(1);
    expect((await ctx.conductor.store.getNode(uuid))?.power_state).toBe("power on");
    power.force(uuid, "power off"); // and went down again: recorded on, BMC off; no power on either
    await runPowerSyncPass(port, { concurrency: 2, forcePowerStateDuringSync: true, maxFailures: 3 });
    expect((await ctx.conductor.store.getNode(uuid))?.power_state).toBe("power off");
    expect(power.of(uuid).slice(before)).toEqual([]);
    expect(power.stateOf(uuid)).toBe("power off");
  });
});
