import { setTimeout as sleep } from "node:timers/promises";
import { HEALTH_STATES, type NodeHealth, type PowerState } from "../../../shared/states.ts";
import { DriverError } from "../errors.ts";
import type { CallOptions, DriverNode, PowerInterface } from "../interfaces.ts";
import { RedfishError, type RedfishConnections } from "./client.ts";
import { errorMessageOf } from "./schemas.ts";
import { parseRedfishDriverInfo } from "./driver-info.ts";
import { postReset, type BootRestorer, type ResetType } from "./reset.ts";
import { loadSystem, type SystemView } from "./system.ts";

export interface RedfishPowerOptions {
  connections: RedfishConnections;
  /** Restores a persistent boot device a BMC could only take as one-time (see RedfishManagement). */
  management?: BootRestorer;
  /** How often to read the system while waiting for a state or a task. Default 1 s. */
  pollIntervalMs?: number;
  /** How long a hard power change may take to show. Default 60 s. */
  powerTimeoutMs?: number;
  /** How long the OS gets to shut down after a soft power off. Default 120 s. */
  softPowerTimeoutMs?: number;
}

/** Redfish's Status.Health → Ironic's health states (sushy's HEALTH_MAP); anything else is not a report. */
export function healthOf(value: string | null | undefined): NodeHealth | null {
  return (HEALTH_STATES as readonly string[]).includes(value ?? "") ? (value as NodeHealth) : null;
}

/** Redfish PowerState → Ironic's; the transitional states count as where they are going (as Ironic maps them). */
export function powerStateOf(value: string | null | undefined): PowerState | null {
  switch (value ?? "") {
    case "On":
    case "PoweringOn":
      return "power on";
    case "Off":
    case "PoweringOff":
      return "power off";
    default:
      return null;
  }
}

/** Power through the Redfish ComputerSystem.Reset action (Ironic's RedfishPower). */
export class RedfishPower implements PowerInterface {
  private readonly connections: RedfishConnections;
  private readonly pollIntervalMs: number;
  private readonly powerTimeoutMs: number;
  private readonly softPowerTimeoutMs: number;

  constructor(private readonly options: RedfishPowerOptions) {
    this.connections = options.connections;
    this.pollIntervalMs = options.pollIntervalMs ?? 1000;
    this.powerTimeoutMs = options.powerTimeoutMs ?? 60_000;
    this.softPowerTimeoutMs = options.softPowerTimeoutMs ?? 120_000;
  }

  /** @throws InvalidDriverInfo */
  validate(node: DriverNode): void {
    parseRedfishDriverInfo(node.driver_info);
  }

  /** @throws InvalidDriverInfo, RedfishError (also for a PowerState Anvil cannot read) */
  async getPowerState(node: DriverNode, options: CallOptions = {}): Promise<PowerState> {
    const view = await loadSystem(this.connections, node, options.signal);
    return this.stateOf(view);
  }

  /** The power state and Status.Health from one GET of the system (Ironic reads the health separately). */
  async getPowerStatus(
    node: DriverNode,
    options: CallOptions = {},
  ): Promise<{ power: PowerState; health: NodeHealth | null }> {
    const view = await loadSystem(this.connections, node, options.signal);
    return { power: this.stateOf(view), health: healthOf(view.system.Status?.Health) };
  }

  /**
   * Switches the node and waits until the system reports the target state.
   * @throws InvalidDriverInfo, RedfishError, DriverError (retryable) when the state never shows
   */
  async setPowerState(
    node: DriverNode,
    target: PowerState,
    options: CallOptions & { soft?: boolean } = {},
  ): Promise<void> {
    const view = await loadSystem(this.connections, node, options.signal);
    if (this.stateOf(view) === target) return;
    await this.change(node, view, { target, soft: options.soft === true, signal: options.signal });
  }

  /**
   * Hard: off, then on (Ironic's order, so a one-time boot device applies to the fresh boot). Soft:
   * GracefulRestart. A node that is off is switched on. A node with `disable_power_off` that is on gets
   * ForceRestart instead of off and on (Ironic's reboot skips the power off for it).
   * @throws InvalidDriverInfo, RedfishError, DriverError
   */
  async reboot(node: DriverNode, options: CallOptions & { soft?: boolean } = {}): Promise<void> {
    const view = await loadSystem(this.connections, node, options.signal);
    if (this.stateOf(view) === "power on") {
      if (options.soft === true || node.disable_power_off === true) {
        await this.options.management?.restoreBootDevice(node, view, options.signal);
        if (options.soft === true) {
          await postReset(view, ["GracefulRestart"], this.resetOptions(options.signal));
          return;
        }
        await postReset(view, ["ForceRestart"], this.resetOptions(options.signal));
        await this.waitFor(node, "power on", { timeoutMs: this.powerTimeoutMs, signal: options.signal });
        return;
      }
      await this.change(node, view, { target: "power off", soft: false, signal: options.signal });
    }
    await this.change(node, view, { target: "power on", soft: false, signal: options.signal });
  }

  private stateOf(view: SystemView): PowerState {
    const state = powerStateOf(view.system.PowerState);
    if (!state)
      throw new RedfishError(
        `Redfish system ${view.path} reports an unknown power state ${JSON.stringify(view.system.PowerState ?? null)}`,
        { status: 200 },
      );
    return state;
  }

  private resetOptions(signal: AbortSignal | undefined) {
    return { signal, taskTimeoutMs: this.powerTimeoutMs, pollIntervalMs: this.pollIntervalMs };
  }

  private async change(
    node: DriverNode,
    view: SystemView,
    request: { target: PowerState; soft: boolean; signal: AbortSignal | undefined },
  ): Promise<void> {
    const { target, soft, signal } = request;
    const wanted: ResetType[] =
      target === "power on" ? ["On", "ForceOn"] : soft ? ["GracefulShutdown"] : ["ForceOff"];
    if (target === "power on") await this.options.management?.restoreBootDevice(node, view, signal);
    const retries = target === "power on" ? view.quirks.powerOnConflictRetries : 0;
    let delay = this.pollIntervalMs;
    for (let attempt = 0; ; attempt++) {
      const response = await postReset(view, wanted, { ...this.resetOptions(signal), accept: [400, 409] });
      if (response.status !== 400 && response.status !== 409) break;
      // the BMC may still be settling from the last action (409), or the node already got there (Ironic
      // treats a 400/409 as success when the system then reports the target state)
      const now = await loadSystem(this.connections, node, signal);
      if (powerStateOf(now.system.PowerState) === target) return;
      if (response.status === 409 && attempt < retries) {
        await sleep(delay, undefined, { signal });
        delay = Math.min(delay * 2, 10_000);
        continue;
      }
      throw new RedfishError(
        `Setting power state to ${soft && target === "power off" ? "soft power off" : target} failed for ` +
          `node ${node.uuid}: the BMC answered HTTP ${response.status}` +
          (errorMessageOf(response.body) ? `: ${errorMessageOf(response.body)}` : ""),
        { status: response.status, detail: errorMessageOf(response.body) },
      );
    }
    await this.waitFor(node, target, {
      timeoutMs: soft ? this.softPowerTimeoutMs : this.powerTimeoutMs,
      signal,
    });
  }

  private async waitFor(
    node: DriverNode,
    target: PowerState,
    options: { timeoutMs: number; signal: AbortSignal | undefined },
  ): Promise<void> {
    const deadline = Date.now() + options.timeoutMs;
    for (;;) {
      const view = await loadSystem(this.connections, node, options.signal);
      const state = powerStateOf(view.system.PowerState);
      if (
        state === target &&
        view.system.PowerState !== "PoweringOn" &&
        view.system.PowerState !== "PoweringOff"
      )
        return;
      if (Date.now() >= deadline) {
        throw new DriverError(
          `Timed out waiting for node ${node.uuid} to reach ${target} after ${options.timeoutMs} ms ` +
            `(the Redfish system reports ${view.system.PowerState ?? "nothing"})`,
          true,
        );
      }
      await sleep(this.pollIntervalMs, undefined, { signal: options.signal });
    }
  }
}
