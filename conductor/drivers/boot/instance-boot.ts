import { INDEXED_INTERNAL_KEYS } from "../../db/store.ts";
import type { DriverTask as Task } from "../task-context.ts";

/** driver_internal_info key: the identity of the conductor that wrote the deployed instance's boot files. */
export const INSTANCE_PREPARED_BY = INDEXED_INTERNAL_KEYS.instancePreparedBy;

/**
 * Writes the deployed instance's boot configuration (a node that still network-boots is sent to its disk) on
 * this conductor and records that it did, so a conductor taking the node over knows to write it again.
 */
export async function prepareInstanceBoot(task: Task): Promise<void> {
  await task.hw.boot.prepareInstance(await task.driverNode());
  await task.mergeInternalInfo({ [INSTANCE_PREPARED_BY]: task.deps.holder });
}
