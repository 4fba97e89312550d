import { writeFile } from "node:fs/promises";
import { exec, startDetached } from "../../shared/system/exec.ts";
import type { NetStep } from "./plan.ts";

/** What runs the steps: the real one below, or a recording fake in tests. */
export interface NetRunner {
  /** Runs `ip` with these arguments. @throws Error with ip's own complaint when it fails */
  ip(args: readonly string[]): Promise<void>;
  /** @throws Error when the file cannot be written (a sysctl the kernel lacks) */
  write(path: string, content: string): Promise<void>;
  /** Starts a daemon that keeps running after the agent exits. */
  daemon(argv: readonly string[]): Promise<void>;
}

const IP_TIMEOUT_MS = 10_000;

/** The Linux runner: iproute2's `ip` from PATH, plain file writes, detached daemons. */
export const linuxRunner: NetRunner = {
  async ip(args) {
    const result = await exec("ip", args, { timeoutMs: IP_TIMEOUT_MS });
    if (result.code !== 0)
      throw new Error(result.stderr.trim() || `exit status ${result.code ?? result.signal}`);
  },
  async write(path, content) {
    await writeFile(path, content);
  },
  async daemon([command, ...args]) {
    if (command === undefined) throw new Error("no command");
    await startDetached(command, args);
  },
};

/** A step failed; the steps before it stay applied. */
export class NetApplyError extends Error {
  constructor(
    readonly step: NetStep,
    cause: unknown,
  ) {
    super(`${describeStep(step)}: ${cause instanceof Error ? cause.message : String(cause)}`);
    this.name = "NetApplyError";
  }
}

/**
 * Runs the steps in order, calling `report` with each one done; stops at the first failure.
 * @throws NetApplyError naming the step and the tool's complaint
 */
export async function applyPlan(
  steps: readonly NetStep[],
  runner: NetRunner,
  report: (line: string) => void = () => undefined,
): Promise<void> {
  for (const step of steps) {
    try {
      switch (step.kind) {
        case "ip":
          await runner.ip(step.args).catch(async (error: unknown) => {
            if (step.ifExists === undefined || !/File exists/.test(String(error))) throw error;
            await runner.ip(step.ifExists);
          });
          break;
        case "write":
          await runner.write(step.path, step.content);
          break;
        case "dhcp4":
          await runner.daemon(step.argv);
          break;
      }
    } catch (error) {
      throw new NetApplyError(step, error);
    }
    report(describeStep(step));
  }
}

/** One line per step, as the console shows it: `ip link set dev eth0 up`. */
export function describeStep(step: NetStep): string {
  switch (step.kind) {
    case "ip":
      return `ip ${step.args.join(" ")}`;
    case "write":
      return `write ${step.path}: ${step.content.trim().replaceAll("\n", "; ")}`;
    case "dhcp4":
      return `DHCPv4 on ${step.link}: ${step.argv.join(" ")}`;
  }
}
