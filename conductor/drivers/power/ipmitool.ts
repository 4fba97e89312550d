import { setTimeout as sleep } from "node:timers/promises";
import type { PowerState } from "../../../shared/states.ts";
import { DriverError } from "../errors.ts";
import type { CallOptions, DriverNode, PowerInterface } from "../interfaces.ts";
import { parseIpmiDriverInfo } from "../ipmi/driver-info.ts";
import type { IpmiDriverInfo } from "../ipmi/driver-info.ts";
import { Ipmitool } from "../ipmi/ipmitool.ts";
import type { RmcpClient } from "../ipmi/rmcp/client.ts";

export interface IpmitoolPowerOptions {
  /** Shared runner: one per conductor, so per-BMC serialisation spans power and management. */
  ipmitool?: Ipmitool;
  /**
   * Reads `getPowerState` natively (RMCP+) instead of through ipmitool, for nodes on cipher suite 3 (the
   * power sync's reads: one ipmitool process costs 7.6-11 ms of CPU, a native read a fraction of one).
   * Changes, and the reads that wait for them, stay with ipmitool.
   */
  statusClient?: RmcpClient;
  /** How often to ask the BMC while waiting for a state change. Default 1 s. */
  pollIntervalMs?: number;
  /** How long a hard power change may take to show. Default 30 s. */
  powerTimeoutMs?: number;
  /** How long the OS gets to shut down after a soft power off. Default 120 s. */
  softPowerTimeoutMs?: number;
}

/** Parses `chassis power status` output ("Chassis Power is on"). @throws DriverError on anything else. */
export function parsePowerStatus(stdout: string): PowerState {
  const match = /Chassis Power is (on|off)/.exec(stdout);
  if (!match)
    throw new DriverError(`unexpected ipmitool power status output: ${stdout.trim().slice(0, 200)}`);
  return match[1] === "on" ? "power on" : "power off";
}

/** Power through IPMI (ipmitool lanplus). */
export class IpmitoolPower implements PowerInterface {
  private readonly ipmitool: Ipmitool;
  private readonly statusClient: RmcpClient | undefined;
  private readonly pollIntervalMs: number;
  private readonly powerTimeoutMs: number;
  private readonly softPowerTimeoutMs: number;

  constructor(options: IpmitoolPowerOptions = {}) {
    this.ipmitool = options.ipmitool ?? new Ipmitool();
    this.statusClient = options.statusClient;
    this.pollIntervalMs = options.pollIntervalMs ?? 1000;
    this.powerTimeoutMs = options.powerTimeoutMs ?? 30_000;
    this.softPowerTimeoutMs = options.softPowerTimeoutMs ?? 120_000;
  }

  /** @throws InvalidDriverInfo */
  validate(node: DriverNode): void {
    parseIpmiDriverInfo(node.driver_info);
  }

  /** @throws InvalidDriverInfo, IpmiCommandError */
  async getPowerState(node: DriverNode, options: CallOptions = {}): Promise<PowerState> {
    const info = parseIpmiDriverInfo(node.driver_info);
    // NOTE: the native client speaks cipher suite 3 only; a node set to another keeps ipmitool
    if (this.statusClient === undefined || info.ipmi_cipher_suite !== 3)
      return this.status(info, options.signal);
    const on = await this.statusClient.powerIsOn(
      {
        host: info.ipmi_address,
        port: info.ipmi_port,
        username: info.ipmi_username,
        password: info.ipmi_password,
        privilege: info.ipmi_priv_level,
      },
      { signal: options.signal },
    );
    return on ? "power on" : "power off";
  }

  /**
   * Switches the node and waits until the BMC reports the target state.
   * @throws InvalidDriverInfo, IpmiCommandError, DriverError (retryable) when the state never shows.
   */
  async setPowerState(
    node: DriverNode,
    target: PowerState,
    options: CallOptions & { soft?: boolean } = {},
  ): Promise<void> {
    const info = parseIpmiDriverInfo(node.driver_info);
    if ((await this.status(info, options.signal)) === target) return;
    await this.change(info, { target, soft: options.soft === true, signal: options.signal });
  }

  /**
   * Off (hard, or soft with the OS's cooperation), then on; a node that is off is just switched on. A node
   * with `disable_power_off` gets `chassis power reset` instead, and no soft reboot (Ironic's ipmitool: IPMI
   * has no soft reset).
   * @throws InvalidDriverInfo, IpmiCommandError, DriverError
   */
  async reboot(node: DriverNode, options: CallOptions & { soft?: boolean } = {}): Promise<void> {
    const info = parseIpmiDriverInfo(node.driver_info);
    const soft = options.soft === true;
    if (node.disable_power_off === true) {
      if (soft)
        throw new DriverError(
          `Node ${node.uuid} hardware does not support feature soft power off, which is required based upon ` +
            "the requested configuration.",
          false,
          { invalidRequest: true },
        );
      await this.ipmitool.run(info, ["chassis", "power", "reset"], { signal: options.signal });
      const wait = { target: "power on", timeoutMs: this.powerTimeoutMs, verb: "reset" } as const;
      await this.waitFor(info, { ...wait, signal: options.signal });
      return;
    }
    if ((await this.status(info, options.signal)) === "power on") {
      await this.change(info, { target: "power off", soft, signal: options.signal });
    }
    await this.change(info, { target: "power on", soft: false, signal: options.signal });
  }

  private async status(info: IpmiDriverInfo, signal: AbortSignal | undefined): Promise<PowerState> {
    return parsePowerStatus(await this.ipmitool.run(info, ["chassis", "power", "status"], { signal }));
  }

  private async change(
    info: IpmiDriverInfo,
    request: { target: PowerState; soft: boolean; signal: AbortSignal | undefined },
  ): Promise<void> {
    const { target, soft, signal } = request;
    const verb = target === "power on" ? "on" : soft ? "soft" : "off";
    await this.ipmitool.run(info, ["chassis", "power", verb], { signal });
    const timeoutMs = soft ? this.softPowerTimeoutMs : this.powerTimeoutMs;
    await this.waitFor(info, { target, timeoutMs, verb, signal });
  }

  /** Polls until the BMC reports `target`. @throws DriverError (retryable) when it never does */
  private async waitFor(
    info: IpmiDriverInfo,
    request: { target: PowerState; timeoutMs: number; verb: string; signal: AbortSignal | undefined },
  ): Promise<void> {
    const { target, timeoutMs, verb, signal } = request;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const state = await this.status(info, signal);
      if (state === target) return;
      if (Date.now() >= deadline) {
        throw new DriverError(
          `BMC ${info.ipmi_address}:${info.ipmi_port} still reports ${state} ${timeoutMs} ms after ` +
            `"chassis power ${verb}" (wanted ${target})`,
          true,
        );
      }
      await sleep(this.pollIntervalMs, undefined, { signal });
    }
  }
}
