import type { Inventory } from "../../shared/inventory.ts";
import type { JsonObject, NodeRecord } from "../../shared/resources.ts";
import { recordInventory } from "../flows/record-inventory.ts";
import { errorMessage } from "../flows/drive.ts";
import type { Provisioner } from "./provisioner.ts";
import { newNode } from "./node-record.ts";

/** plugin_data flag of a node enrolled by discovery (ironic-inspector's, kept by Ironic). */
export const AUTO_DISCOVERED_FLAG = "auto_discovered";

/** Where a driver keeps its BMC's address (Anvil fills it from the inventory; Ironic leaves it to rules). */
function bmcDriverInfo(driver: string, bmc: string | null | undefined): JsonObject {
  if (!bmc) return {};
  if (driver === "ipmi") return { ipmi_address: bmc };
  if (driver === "redfish")
    return { redfish_address: bmc.includes(":") ? `https://[${bmc}]` : `https://${bmc}` };
  return {};
}

/**
 * Ironic's auto-discovery (ContinueInspectionController._auto_enroll, then continue_inspection in `enroll`):
 * a machine no node matches is enrolled with the configured driver, its BMC address from the inventory, and
 * its inspection data processed at once: ports from its interfaces, properties, then the inspection rules.
 * The node stays in `enroll`; a failure while processing is left in last_error (the node is kept).
 * @throws Invalid when the configured driver is unknown
 */
export async function discoverNode(
  provisioner: Provisioner,
  data: { inventory: Inventory; plugin_data: JsonObject },
): Promise<NodeRecord> {
  const { store, config, logger } = provisioner.deps;
  const driver = config.autoDiscovery.driver;
  const hw = provisioner.drivers.get(driver);
  if (!hw) throw new Error(`auto-discovery driver ${driver} is not enabled`);
  const created = await store.createNode(
    newNode({ driver, driver_info: bmcDriverInfo(driver, data.inventory.bmc_address) }, hw, "enroll"),
  );
  provisioner.deps.publish({ type: "created", node: created.uuid });
  logger.info(
    { node: created.uuid, driver, macs: data.inventory.interfaces.map((i) => i.mac_address) },
    "enrolling a newly discovered node",
  );
  const lock = await provisioner.acquire(created, "continue inspection");
  return lock.run(async (task) => {
    await task.update({ inspection_started_at: new Date().toISOString(), inspection_finished_at: null });
    try {
      await recordInventory(task, data.inventory, { ...data.plugin_data, [AUTO_DISCOVERED_FLAG]: true });
    } catch (error) {
      task.log.warn({ err: error }, "processing a discovered node's inspection data failed");
      await task.update({ last_error: `Failed to finish inspection: ${errorMessage(error)}` });
    }
    return task.node;
  });
}
