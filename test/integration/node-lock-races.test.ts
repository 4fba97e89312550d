import { afterEach, describe, expect, it } from "vitest";
import { runPowerSyncPass } from "../../conductor/cluster/power-sync.ts";
import { storePowerSyncPort } from "../../conductor/cluster/power-sync-port.ts";
import { defaultConfig } from "../../conductor/config.ts";
import { driverRegistry, type HardwareType } from "../../conductor/drivers/hardware-type.ts";
import type { DeployInterface, DriverNode } from "../../conductor/drivers/interfaces.ts";
import { FakePower } from "../../conductor/drivers/power/fake.ts";
import { fakeHardware } from "../../conductor/drivers/registry.ts";
import { NoArgs, defineStep } from "../../conductor/drivers/step.ts";
import type { PowerState } from "../../shared/states.ts";
import {
  api,
  faultOf,
  provisionThrough,
  released,
  startConductor,
  waitForState,
} from "../helpers/conductor.ts";

/** A point a driver call stops at while armed: the test sees it reached, then lets it go. */
class Gate {
  private armed = false;
  private reachedNow: () => void = () => undefined;
  private releaseNow: () => void = () => undefined;
  reached: Promise<void> = Promise.resolve();
  private released: Promise<void> = Promise.resolve();

  arm(): void {
    this.armed = true;
    this.reached = new Promise((resolve) => (this.reachedNow = resolve));
    this.released = new Promise((resolve) => (this.releaseNow = resolve));
  }

  /** Called by the double: waits while armed (once). */
  async pass(): Promise<void> {
    if (!this.armed) return;
    this.armed = false;
    this.reachedNow();
    await this.released;
  }

  release(): void {
    this.releaseNow();
  }
}

/**
 * fake-hardware whose power, boot device, boot clean-up and steps record each call (in the order they reach
 * the driver) and stop at a gate when armed.
 */
function recordingHardware() {
  const calls: string[] = [];
  const gates = { power: new Gate(), bootDevice: new Gate(), cleanUp: new Gate(), step: new Gate() };
  const base = fakeHardware(defaultConfig());
  const bmc = new FakePower({ delayMs: 0 });
  const record = async (call: string, gate?: Gate): Promise<void> => {
    calls.push(call);
    await gate?.pass();
  };
  const step = (kind: "clean" | "deploy", name: string, priority: number) =>
    defineStep({
      kind,
      interface: "deploy",
      step: name,
      priority,
      args: NoArgs,
      async run(task) {
        await record(`${kind} step ${name}`, gates.step);
        if (kind === "deploy") await task.setPower("power on");
      },
    });
  const deploy: DeployInterface = {
    name: "fake",
    inBand: false,
    steps: [step("deploy", "deploy", 100), step("clean", "erase_devices", 0)],
  };
  const hw: HardwareType = {
    ...base,
    deploy: [deploy],
    power: {
      validate: (node) => bmc.validate(node),
      getPowerState: (node, options) => bmc.getPowerState(node, options),
      async setPowerState(node, target, options) {
        await record(`power ${target}`, gates.power);
        await bmc.setPowerState(node, target, options);
      },
      async reboot(node, options) {
        await record("reboot", gates.power);
        await bmc.reboot(node, options);
      },
    },
    management: {
      ...base.management,
      supportedBootDevices: () => base.management.supportedBootDevices(),
      validate: (node) => base.management.validate(node),
      getBootDevice: (node, options) => base.management.getBootDevice(node, options),
      async setBootDevice(node, request, options) {
        await record(`boot device ${request.device}`, gates.bootDevice);
        await base.management.setBootDevice(node, request, options);
      },
    },
    boot: {
      ...base.boot,
      validate: (node) => base.boot.validate(node),
      prepareRamdisk: (node, options) => base.boot.prepareRamdisk(node, options),
      prepareInstance: (node) => base.boot.prepareInstance(node),
      cleanUpInstance: (node) => base.boot.cleanUpInstance(node),
      async cleanUpRamdisk(node: DriverNode) {
        await record("clean up ramdisk", gates.cleanUp);
        await base.boot.cleanUpRamdisk(node);
      },
    },
  };
  return { hw, calls, gates, bmc };
}

type Ctx = Awaited<ReturnType<typeof startConductor>>;
let ctx: Ctx | undefined;
afterEach(async () => {
  await ctx?.stop();
  ctx = undefined;
});

const LOCKED =
  /^Node [0-9a-f-]+ is locked by host .+, please retry after the current operation is completed\.$/;

async function setup(state: "manageable" | "available") {
  const double = recordingHardware();
  ctx = await startConductor({}, { drivers: driverRegistry([double.hw]) });
  const { url } = ctx;
  const created = await api(`${url}/v1/nodes`, { method: "POST", body: { driver: "fake-hardware" } });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const uuid = (created.body as { uuid: string }).uuid;
  await provisionThrough(url, uuid, [
    ["manage", "manageable"],
    ...(state === "available" ? [["provide", "available"] as const] : []),
  ]);
  // the races below start from a node nobody holds
  await released(url, uuid);
  double.calls.length = 0;
  const call = (method: string, path: string, body?: unknown) =>
    api(`${url}/v1/nodes/${uuid}${path}`, { method, body });
  return { ...double, url, uuid, call };
}

function expectLocked(answer: { status: number; body: unknown }): void {
  expect(answer.status).toBe(409);
  expect(faultOf(answer.body)).toMatch(LOCKED);
}

describe("two actions on one node: the second gets NodeLocked, never both reach the driver", () => {
  it("a boot device set during a locked clean, and a clean during a boot device set", async () => {
    const t = await setup("manageable");
    const clean = { target: "clean", clean_steps: [{ interface: "deploy", step: "erase_devices" }] };
    t.gates.step.arm();
    expect((await t.call("PUT", "/states/provision", clean)).status).toBe(202);
    await t.gates.step.reached; // the clean holds the lock inside its step
    expectLocked(await t.call("PUT", "/management/boot_device", { boot_device: "pxe" }));
    t.gates.step.release();
    await waitForState(t.url, t.uuid, "manageable");
    await released(t.url, t.uuid); // else the boot device set is refused and its gate never reached
    expect(t.calls).toEqual(["clean step erase_devices"]);

    t.calls.length = 0;
    t.gates.bootDevice.arm();
    const setting = t.call("PUT", "/management/boot_device", { boot_device: "disk" });
    await t.gates.bootDevice.reached; // the set holds the lock inside the BMC call
    expectLocked(await t.call("PUT", "/states/provision", clean));
    t.gates.bootDevice.release();
    expect((await setting).status).toBe(204);
    expect(t.calls).toEqual(["boot device disk"]);
  });

  it("a DELETE during a deploy, and a deploy during a DELETE", async () => {
    const t = await setup("available");
    t.gates.step.arm();
    expect((await t.call("PUT", "/states/provision", { target: "active" })).status).toBe(202);
    await t.gates.step.reached;
    expectLocked(await t.call("DELETE", ""));
    t.gates.step.release();
    await waitForState(t.url, t.uuid, "active");
    expect(t.calls).not.toContain("clean up ramdisk");
    expect(t.calls).toContain("deploy step deploy");

    // back to a deletable state, then the other order
    await provisionThrough(t.url, t.uuid, [["deleted", "available"]]);
    await released(t.url, t.uuid); // else the DELETE is refused and its gate never reached
    t.calls.length = 0;
    t.gates.cleanUp.arm();
    const deleting = t.call("DELETE", "");
    await t.gates.cleanUp.reached; // the DELETE holds the lock while it removes the boot files
    expectLocked(await t.call("PUT", "/states/provision", { target: "active" }));
    t.gates.cleanUp.release();
    expect((await deleting).status).toBe(204);
    expect(t.calls).toEqual(["clean up ramdisk"]);
  });

  it("a power sync correction during a reboot is skipped; a reboot during a correction is refused", async () => {
    const t = await setup("manageable");
    const ops = ctx!.conductor.provisioner;
    const recorded = (await ctx!.conductor.store.getNode(t.uuid))!.power_state as PowerState;
    const other: PowerState = recorded === "power on" ? "power off" : "power on";
    const sync = { concurrency: 1, forcePowerStateDuringSync: true, maxFailures: 3 };

    // the sync lists the node (unreserved) and reads the BMC; a reboot takes the lock before it writes
    t.bmc.force(t.uuid, other);
    const port = storePowerSyncPort(ops);
    const read = new Gate();
    read.arm();
    const passing = runPowerSyncPass(
      {
        ...port,
        getPower: async (node, options) => {
          const state = await port.getPower(node, options);
          await read.pass();
          return state;
        },
      },
      sync,
    );
    await read.reached;
    t.gates.power.arm();
    expect((await t.call("PUT", "/states/power", { target: "rebooting" })).status).toBe(202);
    await t.gates.power.reached; // the reboot holds the lock inside the BMC call
    read.release();
    const report = await passing;
    expect(report.outcomes.skipped).toBe(1);
    expect(report.outcomes.restored).toBe(0);
    t.gates.power.release();
    await ctx!.conductor.provisioner.settle();
    expect(t.calls).toEqual(["reboot"]);

    // the other order: the sync's correction holds the lock inside the BMC call; a reboot is refused
    t.calls.length = 0;
    const now = (await ctx!.conductor.store.getNode(t.uuid))!.power_state as PowerState;
    t.bmc.force(t.uuid, now === "power on" ? "power off" : "power on");
    t.gates.power.arm();
    const correcting = runPowerSyncPass(storePowerSyncPort(ops), sync);
    await t.gates.power.reached;
    expectLocked(await t.call("PUT", "/states/power", { target: "rebooting" }));
    t.gates.power.release();
    expect((await correcting).outcomes.restored).toBe(1);
    expect(t.calls).toEqual([`power ${now}`]);
    expect(t.bmc.stateOf(t.uuid)).toBe(now);
  });
});
