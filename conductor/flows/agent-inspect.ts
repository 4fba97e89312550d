import { InventorySchema } from "../../shared/inventory.ts";
import type { Task } from "../tasks/task.ts";
import { DONE, WAIT, type Flow, type FlowOutcome } from "./flow.ts";
import { recordInventory } from "./record-inventory.ts";
import { bootIntoRamdisk, canFastTrack, leaveRamdisk, powerOffQuietly } from "./ramdisk.ts";

async function collect(task: Task): Promise<FlowOutcome> {
  const raw = await task.deps.agents.call(
    task.node.uuid,
    { name: "get_inventory", args: {} },
    { signal: task.signal, timeoutMs: 120_000 },
  );
  await recordInventory(task, InventorySchema.parse(raw));
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
