import { afterEach, describe, expect, it } from "vitest";
import { runPowerSyncPass } from "../../conductor/cluster/power-sync.ts";
import { storePowerSyncPort } from "../../conductor/cluster/power-sync-port.ts";
import { defaultConfig } from "../../conductor/config.ts";
import { driverRegistry } from "../../conductor/drivers/hardware-type.ts";
import { FakePower } from "../../conductor/drivers/power/fake.ts";
import { fakeHardware } from "../../conductor/drivers/registry.ts";
import type { PowerInterface } from "../../conductor/drivers/interfaces.ts";
import { api, startConductor, waitForState } from "../helpers/conductor.ts";

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
    const uuid = (created.body as { uuid: string }).uuid;
    await api(`${ctx.url}/v1/nodes/ps/states/provision`, { method: "PUT", body: { target: "manage" } });
    await waitForState(ctx.url, "ps", "manageable");
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
});
