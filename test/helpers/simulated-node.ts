import { readFile, truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Inventory } from "../../shared/inventory.ts";
import { api } from "./conductor.ts";
import { sampleInventory, startAgentProcess, writeSimulatedMachine, type AgentProcess } from "./agent.ts";

/**
 * An enrolled node whose "hardware" is simulated: a 20 GiB sparse disk file (reads zeroes), a machine file for
 * the agent, a port with its MAC. `boot()` starts a fresh agent process (a fresh boot id), as a PXE boot would.
 */
export async function enrollSimulatedNode(options: {
  url: string;
  dir: string;
  name: string;
  mac: string;
  executable: string;
  /** extra node fields (interfaces, automated_clean, ...) */
  body?: Record<string, unknown>;
  /** The disk's SMART health check reports failing. */
  smartFailing?: boolean;
  /** Changes the machine's inventory before its file is written. */
  inventory?: (inventory: Inventory) => Inventory;
  /** Burn-in steps whose simulated tools report errors. */
  burninFailing?: ("cpu" | "memory" | "disk" | "network")[];
}): Promise<{ uuid: string; disk: string; boot(): AgentProcess }> {
  const { url, dir, name, mac } = options;
  const disk = join(dir, `${name}.disk`);
  await writeFile(disk, "");
  await truncate(disk, 20 * 1024 ** 3);
  const inventory = sampleInventory({ macs: [mac], diskFile: disk });
  const machine = await writeSimulatedMachine(dir, options.inventory?.(inventory) ?? inventory);
  if (options.smartFailing || options.burninFailing) {
    const content = JSON.parse(await readFile(machine, "utf8")) as Record<string, unknown>;
    await writeFile(
      machine,
      JSON.stringify({
        ...content,
        ...(options.smartFailing ? { smart_failing: [disk] } : {}),
        ...(options.burninFailing ? { burnin_failing: options.burninFailing } : {}),
      }),
    );
  }
  const created = await api(`${url}/v1/nodes`, {
    method: "POST",
    body: { name, driver: "fake-hardware", deploy_interface: "direct", ...options.body },
  });
  if (created.status !== 201) throw new Error(`node create failed: ${JSON.stringify(created.body)}`);
  const uuid = (created.body as { uuid: string }).uuid;
  const port = await api(`${url}/v1/ports`, { method: "POST", body: { node_uuid: uuid, address: mac } });
  if (port.status !== 201) throw new Error(`port create failed: ${JSON.stringify(port.body)}`);
  const wsUrl = url.replace("http://", "ws://") + "/v1/agent";
  return {
    uuid,
    disk,
    boot: () =>
      startAgentProcess({
        executable: options.executable,
        args: ["service", "--conductor", wsUrl, "--backend", "simulated", "--inventory", machine],
      }),
  };
}
