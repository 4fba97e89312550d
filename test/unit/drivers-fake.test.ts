import { describe, expect, it } from "vitest";
import type { DriverNode } from "../../conductor/drivers/interfaces.ts";
import { FakeBoot } from "../../conductor/drivers/boot/fake.ts";
import { FakeManagement } from "../../conductor/drivers/management/fake.ts";
import { FakePower } from "../../conductor/drivers/power/fake.ts";

const node = (uuid: string): DriverNode => ({
  uuid,
  name: null,
  driver_info: {},
  properties: {},
  instance_info: {},
  driver_internal_info: {},
  ports: [],
});

describe("fake-hardware interfaces", () => {
  it("FakePower keeps each node's state, else answers the node's record (Ironic's None)", async () => {
    const power = new FakePower();
    expect(await power.getPowerState(node("a"))).toBeNull();
    expect(await power.getPowerState({ ...node("a"), power_state: "power off" })).toBe("power off");
    await power.setPowerState(node("a"), "power on");
    expect(await power.getPowerState(node("a"))).toBe("power on");
    expect(await power.getPowerState({ ...node("a"), power_state: "power off" })).toBe("power on");
    expect(await power.getPowerState(node("b"))).toBeNull();
    await power.reboot(node("b"));
    expect(power.stateOf("b")).toBe("power on");
    power.force("a", "power off");
    expect(await power.getPowerState(node("a"))).toBe("power off");
  });

  it("FakePower honours an aborted signal", async () => {
    const controller = new AbortController();
    controller.abort();
    await expect(new FakePower().getPowerState(node("a"), { signal: controller.signal })).rejects.toThrow();
  });

  it("FakeManagement remembers the boot device", async () => {
    const management = new FakeManagement();
    expect(await management.getBootDevice(node("a"))).toEqual({ boot_device: null, persistent: null });
    await management.setBootDevice(node("a"), { device: "pxe", persistent: true });
    expect(await management.getBootDevice(node("a"))).toEqual({ boot_device: "pxe", persistent: true });
  });

  it("FakeBoot records what it prepared and forgets it on clean-up", async () => {
    const boot = new FakeBoot();
    await boot.prepareRamdisk(node("a"), { agentParams: { "anvil.conductor": "ws://x" } });
    expect(boot.stateOf("a")).toEqual({ kind: "ramdisk", agentParams: { "anvil.conductor": "ws://x" } });
    await boot.cleanUpInstance(node("a")); // not an instance: kept
    expect(boot.stateOf("a").kind).toBe("ramdisk");
    await boot.cleanUpRamdisk(node("a"));
    expect(boot.stateOf("a")).toEqual({ kind: "none" });
    await boot.prepareInstance(node("a"));
    expect(boot.stateOf("a")).toEqual({ kind: "instance" });
  });
});
