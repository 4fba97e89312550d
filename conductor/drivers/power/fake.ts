import { setTimeout as sleep } from "node:timers/promises";
import type { PowerState } from "../../../shared/states.ts";
import type { CallOptions, DriverNode, PowerInterface } from "../interfaces.ts";

/** Ironic's fake-hardware power: state in memory per node uuid, a short delay per call. */
export class FakePower implements PowerInterface {
  private readonly states = new Map<string, PowerState>();
  private readonly delayMs: number;
  private readonly initial: PowerState;

  constructor(options: { delayMs?: number; initial?: PowerState } = {}) {
    this.delayMs = options.delayMs ?? 5;
    this.initial = options.initial ?? "power off";
  }

  validate(_node: DriverNode): void {}

  async getPowerState(node: DriverNode, options: CallOptions = {}): Promise<PowerState> {
    await sleep(this.delayMs, undefined, { signal: options.signal });
    return this.stateOf(node.uuid);
  }

  async setPowerState(node: DriverNode, target: PowerState, options: CallOptions = {}): Promise<void> {
    await sleep(this.delayMs, undefined, { signal: options.signal });
    this.states.set(node.uuid, target);
  }

  async reboot(node: DriverNode, options: CallOptions = {}): Promise<void> {
    await sleep(this.delayMs, undefined, { signal: options.signal });
    this.states.set(node.uuid, "power on");
  }

  /** The state without the delay (tests; out-of-band changes through force()). */
  stateOf(uuid: string): PowerState {
    return this.states.get(uuid) ?? this.initial;
  }

  /** Changes the state behind the conductor's back, like someone pressing the button. */
  force(uuid: string, state: PowerState): void {
    this.states.set(uuid, state);
  }
}
