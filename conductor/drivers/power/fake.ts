import { setTimeout as sleep } from "node:timers/promises";
import type { PowerState } from "../../../shared/states.ts";
import type { CallOptions, DriverNode, PowerInterface } from "../interfaces.ts";

/**
 * Ironic's fake-hardware power: a short delay per call; what it was last set to per node uuid, else the
 * node's recorded power state, as Ironic's FakePower.get_power_state answers `task.node.power_state`. A
 * node never powered is therefore `None` after enroll, manage and provide, and allocations skip it.
 */
export class FakePower implements PowerInterface {
  private readonly states = new Map<string, PowerState>();
  private readonly delayMs: number;
  private readonly initial: PowerState | null;

  /** `initial`: a state every node starts in (tests of a BMC with a mind of its own); default none. */
  constructor(options: { delayMs?: number; initial?: PowerState | null } = {}) {
    this.delayMs = options.delayMs ?? 5;
    this.initial = options.initial ?? null;
  }

  validate(_node: DriverNode): void {}

  async getPowerState(node: DriverNode, options: CallOptions = {}): Promise<PowerState | null> {
    await sleep(this.delayMs, undefined, { signal: options.signal });
    return this.stateOf(node.uuid) ?? node.power_state ?? null;
  }

  async setPowerState(node: DriverNode, target: PowerState, options: CallOptions = {}): Promise<void> {
    await sleep(this.delayMs, undefined, { signal: options.signal });
    this.states.set(node.uuid, target);
  }

  async reboot(node: DriverNode, options: CallOptions = {}): Promise<void> {
    await sleep(this.delayMs, undefined, { signal: options.signal });
    this.states.set(node.uuid, "power on");
  }

  /** The state set on this fake (or `initial`), without the delay; null where only the node's record tells. */
  stateOf(uuid: string): PowerState | null {
    return this.states.get(uuid) ?? this.initial;
  }

  /** Changes the state behind the conductor's back, like someone pressing the button. */
  force(uuid: string, state: PowerState): void {
    this.states.set(uuid, state);
  }
}
