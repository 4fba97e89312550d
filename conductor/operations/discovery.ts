import { type Inventory, InventorySchema } from "../../shared/inventory.ts";
import { type JsonObject, type NodeRecord, newPortRecord } from "../../shared/resources.ts";
import { DISCOVERY_AWAITS_AGENT } from "../agents/directory-store.ts";
import { Duplicate } from "../db/store.ts";
import { isMac, normalizeMac } from "../drivers/boot/mac.ts";
import { NotFound } from "../errors.ts";
import { errorMessage } from "../flows/drive.ts";
import { pxeMac } from "../flows/inspection-results.ts";
import { recordInventory } from "../flows/record-inventory.ts";
import type { Task } from "../tasks/task.ts";
import type { Provisioner } from "./provisioner.ts";
import { newNode } from "./node-record.ts";

/** plugin_data flag of a node enrolled by discovery (ironic-inspector's, kept by Ironic). */
export const AUTO_DISCOVERED_FLAG = "auto_discovered";

/** How long a discovered machine's agent has to answer get_inventory, and power_off. */
const INVENTORY_TIMEOUT_MS = 120_000;
const POWER_OFF_TIMEOUT_MS = 30_000;

/** Where a driver keeps its BMC's address (Anvil fills it from the inventory; Ironic leaves it to rules). */
function bmcDriverInfo(driver: string, bmc: string | null | undefined): JsonObject {
  if (!bmc) return {};
  if (driver === "ipmi") return { ipmi_address: bmc };
  if (driver === "redfish")
    return { redfish_address: bmc.includes(":") ? `https://[${bmc}]` : `https://${bmc}` };
  return {};
}

/** A machine seen for the first time: its MACs, its BMC's address if it knows it, the MAC it booted from. */
export interface DiscoveredMachine {
  macs: readonly string[];
  bmcAddress: string | null | undefined;
  /** The port that gets pxe_enabled (all of them when unknown, as Ironic's inspection does). */
  bootMac?: string | null;
  /** Enrolled from its agent's hello: the node waits in `enroll` for the agent's inventory. */
  awaitsAgent?: boolean;
}

/**
 * The first half of Ironic's auto-discovery (ContinueInspectionController._auto_enroll): a node in `enroll`
 * with the configured driver, its BMC address from the inventory, and a port per MAC, so the machine's next
 * hello or post finds it. Null when a port already has one of the MACs (another request enrolled the machine
 * first: the unique port address decides, across conductors too); the half-made node is deleted then.
 * @throws Error when the configured driver is not enabled
 */
export async function enrollDiscovered(
  provisioner: Provisioner,
  machine: DiscoveredMachine,
): Promise<NodeRecord | null> {
  const { store, config, logger } = provisioner.deps;
  const driver = config.autoDiscovery.driver;
  const hw = provisioner.drivers.get(driver);
  if (!hw) throw new Error(`auto-discovery driver ${driver} is not enabled`);
  const macs = [...new Set(machine.macs.filter(isMac).map(normalizeMac))];
  const record = newNode({ driver, driver_info: bmcDriverInfo(driver, machine.bmcAddress) }, hw, "enroll");
  const created = await store.createNode({
    ...record,
    driver_internal_info: machine.awaitsAgent === true ? { [DISCOVERY_AWAITS_AGENT]: true } : {},
  });
  const boot = machine.bootMac ?? null;
  try {
    for (const address of macs) {
      const port = newPortRecord({
        address,
        node_uuid: created.uuid,
        pxe_enabled: boot === null || address === boot,
      });
      await store.createPort(port);
    }
  } catch (error) {
    await store.deleteNode(created.uuid);
    if (error instanceof Duplicate) return null;
    throw error;
  }
  provisioner.deps.publish({ type: "created", node: created.uuid });
  logger.info(
    { node: created.uuid, driver, macs, bmc: machine.bmcAddress ?? null },
    "enrolling a newly discovered node",
  );
  return created;
}

/**
 * The second half (Ironic's continue_inspection for a node in `enroll`): the inspection data processed as
 * any inspection's (properties, ports, the rules), flagged `auto_discovered` in the plugin data. A failure is
 * kept in last_error and the node stays, as Ironic's does.
 */
async function processDiscovered(task: Task, inventory: Inventory, pluginData: JsonObject): Promise<void> {
  const { [DISCOVERY_AWAITS_AGENT]: _awaits, ...internal } = task.node.driver_internal_info;
  await task.update({
    driver_internal_info: internal,
    inspection_started_at: task.node.inspection_started_at ?? new Date().toISOString(),
    inspection_finished_at: null,
  });
  await markBootPort(task, pxeMac(inventory));
  try {
    await recordInventory(task, inventory, { ...pluginData, [AUTO_DISCOVERED_FLAG]: true });
  } catch (error) {
    task.log.warn({ err: error }, "processing a discovered node's inspection data failed");
    await task.update({ last_error: `Failed to finish inspection: ${errorMessage(error)}` });
  }
}

/** The hello named no boot MAC: once the inventory does, only that port of the new node boots by PXE. */
async function markBootPort(task: Task, boot: string | null): Promise<void> {
  if (boot === null) return;
  const { store } = task.deps;
  for (const port of await store.listPorts({ node_uuid: task.node.uuid }, {})) {
    const wanted = port.address === boot;
    if (port.pxe_enabled !== wanted) await store.updatePort(port.uuid, { pxe_enabled: wanted });
  }
}

/**
 * Auto-discovery from a ramdisk's POST /v1/continue_inspection: enroll, then process its data at once.
 * @throws NotFound when another request enrolled the machine meanwhile, Error for a disabled driver
 */
export async function discoverNode(
  provisioner: Provisioner,
  data: { inventory: Inventory; plugin_data: JsonObject },
): Promise<NodeRecord> {
  const created = await enrollDiscovered(provisioner, {
    macs: data.inventory.interfaces.map((i) => i.mac_address),
    bmcAddress: data.inventory.bmc_address,
    bootMac: pxeMac(data.inventory),
  });
  if (created === null) throw new NotFound("Resource could not be found.");
  const lock = await provisioner.acquire(created, "continue inspection");
  return lock.run(async (task) => {
    await processDiscovered(task, data.inventory, data.plugin_data);
    return task.node;
  });
}

/**
 * Auto-discovery from Anvil's agent: the machine's hello enrolled the node (enrollDiscovered, awaiting its
 * agent); once the agent is connected its inventory is asked for and processed as a posted one is. Then the
 * agent powers the machine off, as Ironic powers a node off after inspection, unless fast track is on: the
 * agent stays, and the operator's next manage/inspect/clean uses it without a boot. A machine that drops its
 * link before answering keeps the flag and is asked again when it reconnects.
 * @returns false when the node is not a discovered one waiting for its agent (the caller resumes it as usual)
 */
export async function discoveredAgentConnected(provisioner: Provisioner, uuid: string): Promise<boolean> {
  const { store, agents, config } = provisioner.deps;
  const node = await store.getNode(uuid);
  if (node?.provision_state !== "enroll" || node.driver_internal_info[DISCOVERY_AWAITS_AGENT] !== true)
    return false;
  const lock = await provisioner.tryAcquire(node, "discovery");
  if (lock === undefined) return true;
  await lock.run(async (task) => {
    let inventory: Inventory;
    try {
      const raw = await agents.call(
        uuid,
        { name: "get_inventory", args: {} },
        { signal: task.signal, timeoutMs: INVENTORY_TIMEOUT_MS },
      );
      inventory = InventorySchema.parse(raw);
    } catch (error) {
      task.log.warn({ err: error }, "a discovered machine's agent did not give its inventory");
      await task.update({ last_error: `Failed to finish inspection: ${errorMessage(error)}` });
      return;
    }
    await processDiscovered(task, inventory, {});
    task.log.info({ fast_track: config.agent.fastTrack }, "finished auto-discovery of a node");
    if (config.agent.fastTrack) return;
    await agents
      .call(uuid, { name: "power_off", args: {} }, { timeoutMs: POWER_OFF_TIMEOUT_MS })
      .catch((error: unknown) => task.log.warn({ err: error }, "the discovered machine did not power off"));
  });
  return true;
}
