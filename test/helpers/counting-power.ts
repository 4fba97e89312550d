import { defaultConfig } from "../../conductor/config.ts";
import { driverRegistry, type DriverRegistry } from "../../conductor/drivers/hardware-type.ts";
import type { CallOptions, DriverNode } from "../../conductor/drivers/interfaces.ts";
import { FakePower } from "../../conductor/drivers/power/fake.ts";
import { fakeHardware } from "../../conductor/drivers/registry.ts";
import type { PowerState } from "../../shared/states.ts";

/** One call that reached the power driver: a set (with its target and softness) or a reboot. */
export type PowerCall =
  { node: string; call: "set"; target: PowerState; soft: boolean } | { node: string; call: "reboot" };

/** Fake-hardware power that records every call reaching the driver, so a test can count them. */
export class CountingPower extends FakePower {
  readonly calls: PowerCall[] = [];

  override async setPowerState(
    node: DriverNode,
    target: PowerState,
    options: CallOptions & { soft?: boolean } = {},
  ): Promise<void> {
    this.calls.push({ node: node.uuid, call: "set", target, soft: options.soft === true });
    await super.setPowerState(node, target, options);
  }

  override async reboot(node: DriverNode, options: CallOptions = {}): Promise<void> {
    this.calls.push({ node: node.uuid, call: "reboot" });
    await super.reboot(node, options);
  }

  /** The calls made for one node, as words: "power on", "power off", "soft power off", "reboot". */
  of(uuid: string): string[] {
    return this.calls
      .filter((c) => c.node === uuid)
      .map((c) => (c.call === "reboot" ? "reboot" : c.soft ? `soft ${c.target}` : c.target));
  }
}

/** The fake-hardware type with `power` in place of its power interface. */
export function fakeHardwareWith(power: CountingPower): DriverRegistry {
  return driverRegistry([{ ...fakeHardware(defaultConfig()), power }]);
}
