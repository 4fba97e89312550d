import { InventorySchema } from "../../shared/inventory.ts";
import type { InspectInterface, OutOfBandInspectInterface } from "../drivers/interfaces.ts";
import { DONE, type Flow } from "./flow.ts";
import { recordInventory } from "./record-inventory.ts";

/** Out-of-band inspection: the BMC describes the hardware; no ramdisk, no power change. */
export function outOfBandInspect(inspect: OutOfBandInspectInterface): Flow {
  return {
    async start(task) {
      await task.update({ inspection_started_at: new Date().toISOString(), inspection_finished_at: null });
      const inventory = await inspect.inspectHardware(await task.driverNode(), { signal: task.signal });
      await recordInventory(task, InventorySchema.parse(inventory));
      return DONE;
    },
  };
}

export function isOutOfBand(inspect: InspectInterface): inspect is OutOfBandInspectInterface {
  return typeof inspect.inspectHardware === "function";
}
