import { open } from "node:fs/promises";
import { NETWORK_DATA_MAX_BYTES, NetworkDataError, parseNetworkData } from "../../shared/network-data.ts";
import { applyPlan, describeStep, NetApplyError } from "./apply.ts";
import type { NetRunner } from "./apply.ts";
import { readMachineLinks } from "./machine-links.ts";
import { NetPlanError, planNetwork } from "./plan.ts";
import type { PlanOptions } from "./plan.ts";

export interface NetconfigOptions extends PlanOptions {
  networkData: string;
  /** Root of sysfs, where the machine's links are read. */
  sys: string;
  /** Print the steps without running them. */
  dryRun: boolean;
  runner: NetRunner;
  out: (line: string) => void;
}

/**
 * `anvil-agent netconfig`: reads network_data.json, plans against this machine's links and applies it,
 * printing each step. 0 when everything applied; 1 with one line naming the problem otherwise (bad data,
 * a link not on this machine, a step the kernel refused), so that /init can fall back to DHCP.
 */
export async function netconfig(options: NetconfigOptions): Promise<number> {
  try {
    const data = parseNetworkData(await readBoundedFile(options.networkData));
    const machine = await readMachineLinks(options.sys);
    const plan = planNetwork(data, machine, options);
    for (const [id, name] of plan.names) options.out(`link ${id} is ${name}`);
    for (const warning of plan.warnings) options.out(`warning: ${warning}`);
    if (options.dryRun) {
      for (const step of plan.steps) options.out(`would run: ${describeStep(step)}`);
      return 0;
    }
    await applyPlan(plan.steps, options.runner, (line) => options.out(`done: ${line}`));
    options.out(`network configured from ${options.networkData} (${plan.steps.length} steps)`);
    return 0;
  } catch (error) {
    if (
      error instanceof NetworkDataError ||
      error instanceof NetPlanError ||
      error instanceof NetApplyError
    ) {
      options.out(`netconfig failed: ${error.message}`);
      return 1;
    }
    if (isErrno(error)) {
      options.out(`netconfig failed: cannot read ${options.networkData}: ${error.code}`);
      return 1;
    }
    throw error;
  }
}

/** The file's text, refusing one larger than network_data.json can sensibly be before reading it all. */
async function readBoundedFile(path: string): Promise<string> {
  const handle = await open(path, "r");
  try {
    const buffer = Buffer.alloc(NETWORK_DATA_MAX_BYTES + 1);
    let size = 0;
    while (size < buffer.length) {
      const { bytesRead } = await handle.read(buffer, size, buffer.length - size, null);
      if (bytesRead === 0) break;
      size += bytesRead;
    }
    if (size > NETWORK_DATA_MAX_BYTES)
      throw new NetworkDataError(`${path} is larger than ${NETWORK_DATA_MAX_BYTES} bytes`);
    return buffer.subarray(0, size).toString("utf8");
  } finally {
    await handle.close();
  }
}

function isErrno(error: unknown): error is NodeJS.ErrnoException & { code: string } {
  return error instanceof Error && typeof (error as NodeJS.ErrnoException).code === "string";
}
