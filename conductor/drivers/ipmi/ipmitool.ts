import { setTimeout as sleep } from "node:timers/promises";
import { exec, ExecTimeoutError } from "../../../shared/system/exec.ts";
import type { ExecResult } from "../../../shared/system/exec.ts";
import { silentLogger } from "../../../shared/log.ts";
import type { Logger } from "../../../shared/log.ts";
import { DriverError } from "../errors.ts";
import { bmcKey } from "./driver-info.ts";
import { ipmitoolHome } from "./pen-registry.ts";
import type { IpmiDriverInfo } from "./driver-info.ts";

/** Why an ipmitool call failed; decides whether retrying can help. */
export type IpmiFailureKind = "unreachable" | "auth" | "rejected" | "timeout" | "failed";

export class IpmiCommandError extends DriverError {
  constructor(
    message: string,
    readonly kind: IpmiFailureKind,
  ) {
    super(message, kind === "unreachable" || kind === "timeout");
    this.name = "IpmiCommandError";
  }
}

export interface IpmitoolOptions {
  /** Minimum gap between two commands to the same BMC (BMCs drop sessions when hammered). Default 100 ms. */
  minIntervalMs?: number;
  /** Kill one ipmitool run after this long. Default 20 s. */
  callTimeoutMs?: number;
  /** Extra attempts after a transient failure (no answer, session not established, timeout). Default 2. */
  retries?: number;
  /** Pause before a retry. Default 500 ms. */
  retryDelayMs?: number;
  /**
   * ipmitool's own per-packet timeout (-N, seconds) and retransmissions (-R). Defaults 1 and 2, which give
   * up on a silent BMC after about 6 s. -R 0 means ipmitool's default (about 20 s), so at least 1 is used.
   */
  sessionTimeoutSec?: number;
  sessionRetries?: number;
  logger?: Logger;
  /** The ipmitool binary (tests and benchmarks may wrap it). */
  binary?: string;
  /**
   * Let ipmitool load the system's whole enterprise number registry on every run (its default). Off by
   * default: a one-entry registry saves about three quarters of each run's CPU (see pen-registry.ts).
   */
  fullEnterpriseRegistry?: boolean;
  /** Told of every finished call (after its retries): metrics. `outcome` is "ok" or the failure kind. */
  onCall?: (call: { command: string; outcome: string; seconds: number }) => void;
}

interface BmcSlot {
  tail: Promise<void>;
  lastEnd: number;
  pending: number;
  expiry?: NodeJS.Timeout;
}

// stderr patterns, checked in order. ipmitool prints "Error: Unable to establish ..." for both a silent
// BMC and bad credentials; with -v the RAKP lines tell them apart.
const FAILURE_PATTERNS: { kind: IpmiFailureKind; pattern: RegExp; hint: string }[] = [
  { kind: "auth", pattern: /RAKP 2 HMAC is invalid/, hint: "wrong password" },
  { kind: "auth", pattern: /unauthorized name/, hint: "unknown user name" },
  {
    kind: "auth",
    pattern: /RAKP \d message indicates an error : (.*)/,
    hint: "the BMC refused the session",
  },
  { kind: "auth", pattern: /privilege level exceeds limit/i, hint: "privilege level too high" },
  {
    kind: "rejected",
    pattern: /Set Chassis Boot Parameter \d+ failed.*|Unable to set Chassis Power Control.*/,
    hint: "the BMC rejected the command",
  },
  {
    kind: "unreachable",
    pattern:
      /Unable to establish IPMI v2|Get Auth Capabilities error|No response from remote controller|Insufficient resources for session|Node busy/,
    hint: "the BMC did not answer",
  },
];

/** The flags every call carries; the password goes through IPMI_PASSWORD (-E), never argv. */
function connectionArgs(
  info: IpmiDriverInfo,
  options: Required<Pick<IpmitoolOptions, "sessionTimeoutSec" | "sessionRetries">>,
): string[] {
  const args = ["-v", "-I", "lanplus", "-H", info.ipmi_address, "-p", String(info.ipmi_port)];
  if (info.ipmi_username !== "") args.push("-U", info.ipmi_username);
  args.push("-E", "-C", String(info.ipmi_cipher_suite), "-L", info.ipmi_priv_level);
  args.push("-N", String(options.sessionTimeoutSec), "-R", String(options.sessionRetries));
  return args;
}

/** Finds the failure in a finished run, or null when the run succeeded. */
export function classifyIpmitoolResult(result: ExecResult): { kind: IpmiFailureKind; detail: string } | null {
  for (const { kind, pattern, hint } of FAILURE_PATTERNS) {
    const match = pattern.exec(result.stderr);
    if (match) {
      // "rejected" shows up with exit code 0; the others come with a failing exit code anyway.
      return { kind, detail: `${hint} (${match[0].trim()})` };
    }
  }
  if (result.code === 0) return null;
  const lines = result.stderr
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "");
  const lastLine = lines.filter((line) => line.startsWith("Error")).pop() ?? lines.pop();
  return { kind: "failed", detail: `exit ${result.code ?? result.signal}: ${lastLine ?? "no output"}` };
}

/** Waits for the promise, or rejects with the signal's reason as soon as it aborts. */
function untilOrAborted(promise: Promise<void>, signal: AbortSignal | undefined): Promise<void> {
  if (signal === undefined) return promise;
  signal.throwIfAborted();
  return new Promise((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    void promise.then(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    });
  });
}

/**
 * Runs ipmitool against BMCs: one command at a time per BMC, a minimum interval between them,
 * a timeout per call, and retries on transient failures.
 */
export class Ipmitool {
  private readonly slots = new Map<string, BmcSlot>();
  private readonly minIntervalMs: number;
  private readonly callTimeoutMs: number;
  private readonly retries: number;
  private readonly retryDelayMs: number;
  private readonly sessionTimeoutSec: number;
  private readonly sessionRetries: number;
  private readonly logger: Logger;
  private readonly binary: string;
  private readonly fullEnterpriseRegistry: boolean;
  private readonly onCall: NonNullable<IpmitoolOptions["onCall"]>;

  constructor(options: IpmitoolOptions = {}) {
    this.minIntervalMs = options.minIntervalMs ?? 100;
    this.callTimeoutMs = options.callTimeoutMs ?? 20_000;
    this.retries = options.retries ?? 2;
    this.retryDelayMs = options.retryDelayMs ?? 500;
    this.sessionTimeoutSec = options.sessionTimeoutSec ?? 1;
    this.sessionRetries = Math.max(1, options.sessionRetries ?? 2);
    this.logger = options.logger ?? silentLogger;
    this.binary = options.binary ?? "ipmitool";
    this.fullEnterpriseRegistry = options.fullEnterpriseRegistry ?? false;
    this.onCall = options.onCall ?? (() => undefined);
  }

  /**
   * Runs one ipmitool command (e.g. ["chassis", "power", "status"]) and returns its stdout.
   * @throws IpmiCommandError (kind says why; retryable for unreachable/timeout); the signal's reason when aborted.
   */
  async run(
    info: IpmiDriverInfo,
    command: readonly string[],
    options: { signal?: AbortSignal } = {},
  ): Promise<string> {
    const bmc = bmcKey(info);
    const what = `ipmitool ${command.join(" ")} to ${bmc}`;
    // the verb without its arguments (chassis power status → "chassis power"): a bounded label set
    const verb = command.slice(0, 2).join(" ");
    const began = performance.now();
    const report = (outcome: string) =>
      this.onCall({ command: verb, outcome, seconds: (performance.now() - began) / 1000 });
    for (let attempt = 0; ; attempt++) {
      const outcome = await this.inSlot(bmc, options.signal, () => this.once(info, command, options.signal));
      if (outcome.ok) {
        report("ok");
        return outcome.stdout;
      }
      const error = new IpmiCommandError(`${what} failed: ${outcome.detail}`, outcome.kind);
      if (!error.retryable || attempt >= this.retries) {
        report(error.kind);
        this.logger.warn(
          { bmc, command: command.join(" "), kind: error.kind, attempts: attempt + 1 },
          error.message,
        );
        throw error;
      }
      this.logger.debug({ bmc, command: command.join(" "), kind: error.kind, attempt }, "ipmitool retry");
      await sleep(this.retryDelayMs, undefined, { signal: options.signal });
    }
  }

  /**
   * The program, argv and environment of one ipmitool command to `info`'s BMC, for a caller that runs it
   * itself (a SOL session lives as long as the console): the password in the environment, never argv.
   */
  invocation(
    info: IpmiDriverInfo,
    command: readonly string[],
  ): { binary: string; args: string[]; env: Record<string, string> } {
    const args = [
      ...connectionArgs(info, {
        sessionTimeoutSec: this.sessionTimeoutSec,
        sessionRetries: this.sessionRetries,
      }),
      ...command,
    ];
    const env: Record<string, string> = { IPMI_PASSWORD: info.ipmi_password };
    if (!this.fullEnterpriseRegistry) env.HOME = ipmitoolHome();
    return { binary: this.binary, args, env };
  }

  private async once(
    info: IpmiDriverInfo,
    command: readonly string[],
    signal: AbortSignal | undefined,
  ): Promise<{ ok: true; stdout: string } | { ok: false; kind: IpmiFailureKind; detail: string }> {
    const args = [
      ...connectionArgs(info, {
        sessionTimeoutSec: this.sessionTimeoutSec,
        sessionRetries: this.sessionRetries,
      }),
      ...command,
    ];
    try {
      const env: Record<string, string> = { IPMI_PASSWORD: info.ipmi_password };
      if (!this.fullEnterpriseRegistry) env.HOME = ipmitoolHome();
      const result = await exec(this.binary, args, {
        env,
        timeoutMs: this.callTimeoutMs,
        signal,
      });
      const failure = classifyIpmitoolResult(result);
      return failure === null ? { ok: true, stdout: result.stdout } : { ok: false, ...failure };
    } catch (error) {
      if (error instanceof ExecTimeoutError) {
        return { ok: false, kind: "timeout", detail: `no result within ${this.callTimeoutMs} ms` };
      }
      throw error;
    }
  }

  /** Waits for the BMC's previous command and the minimum interval, then runs fn alone for that BMC. */
  private async inSlot<T>(bmc: string, signal: AbortSignal | undefined, fn: () => Promise<T>): Promise<T> {
    let slot = this.slots.get(bmc);
    if (slot === undefined) {
      slot = { tail: Promise.resolve(), lastEnd: 0, pending: 0 };
      this.slots.set(bmc, slot);
    }
    clearTimeout(slot.expiry);
    slot.pending++;
    const previous = slot.tail;
    let release = (): void => undefined;
    const mine = new Promise<void>((resolve) => (release = resolve));
    // The next command waits for the previous one too: a caller that gives up while queued must not
    // let the next run alongside a command still in flight.
    slot.tail = previous.then(() => mine);
    let ran = false;
    try {
      await untilOrAborted(previous, signal);
      const wait = slot.lastEnd + this.minIntervalMs - Date.now();
      if (wait > 0) await sleep(wait, undefined, { signal });
      ran = true;
      return await fn();
    } finally {
      if (ran) slot.lastEnd = Date.now();
      slot.pending--;
      release();
      if (slot.pending === 0) {
        const idle = slot;
        // Forget idle BMCs once their interval has passed, so 10^5 nodes don't leave 10^5 entries.
        idle.expiry = setTimeout(() => {
          if (idle.pending === 0 && this.slots.get(bmc) === idle) this.slots.delete(bmc);
        }, this.minIntervalMs).unref();
      }
    }
  }
}
