import { CollectorDataSchema, type Inventory, InventorySchema } from "../../shared/inventory.ts";
import type { JsonObject } from "../../shared/resources.ts";
import type { Task } from "../tasks/task.ts";
import { DONE, WAIT, type Flow, type FlowOutcome } from "./flow.ts";
import { recordInventory } from "./record-inventory.ts";
import { bootIntoRamdisk, canFastTrack, leaveRamdisk, powerOffQuietly } from "./ramdisk.ts";

/**
 * driver_internal_info flag: a ramdisk posted this inspection's data (Ironic's continue_inspection, 1.84) and
 * it waits in the store, so the agent is not asked for it.
 */
export const POSTED_INSPECTION_DATA = "inspection_data_posted";

/** What a ramdisk posted, read back from the store. @throws when the inventory is missing or malformed */
async function postedData(task: Task): Promise<{ inventory: Inventory; pluginData: JsonObject }> {
  const saved = (await task.deps.store.getInventory(task.node.uuid)) as {
    inventory?: unknown;
    plugin_data?: JsonObject;
  } | null;
  return { inventory: InventorySchema.parse(saved?.inventory), pluginData: saved?.plugin_data ?? {} };
}

/**
 * The agent's collector data (IPA's plugin_data: lldp_raw, pci_devices, numa_topology); {} with a warning
 * when the agent cannot give it or gives it malformed, as IPA's failing collectors do not fail inspection.
 */
async function collectorData(task: Task): Promise<JsonObject> {
  try {
    const raw = await task.deps.agents.call(
      task.node.uuid,
      { name: "get_inspection_data", args: {} },
      { signal: task.signal, timeoutMs: 120_000 },
    );
    const parsed = CollectorDataSchema.safeParse(raw);
    if (parsed.success) return parsed.data as JsonObject;
    task.log.warn({ error: parsed.error.message.slice(0, 300) }, "ignoring malformed inspection data");
  } catch (error) {
    if (task.signal.aborted) throw error;
    task.log.warn({ err: error }, "the agent gave no inspection data beside the inventory");
  }
  return {};
}

async function collect(task: Task): Promise<FlowOutcome> {
  const { [POSTED_INSPECTION_DATA]: posted, ...internal } = task.node.driver_internal_info;
  if (posted === true) {
    const { inventory, pluginData } = await postedData(task);
    await task.update({ driver_internal_info: internal });
    await recordInventory(task, inventory, pluginData);
  } else {
    // both read-only: the collectors (LLDP listens for seconds) run while the inventory is read
    const [raw, collected] = await Promise.all([
      task.deps.agents.call(
        task.node.uuid,
        { name: "get_inventory", args: {} },
        { signal: task.signal, timeoutMs: 120_000 },
      ),
      collectorData(task),
    ]);
    await recordInventory(task, InventorySchema.parse(raw), collected);
  }
  await leaveRamdisk(task);
  return DONE;
}

/** In-band inspection: boot the ramdisk, take the agent's inventory, fill in properties and ports. */
export const agentInspect: Flow = {
  async start(task) {
    await task.update({ inspection_started_at: new Date().toISOString(), inspection_finished_at: null });
    if (canFastTrack(task)) return collect(task);
    await bootIntoRamdisk(task);
    return WAIT;
  },
  resume: collect,
  onFail: powerOffQuietly,
};
