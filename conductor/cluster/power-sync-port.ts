import { randomUUID } from "node:crypto";
import { historyState, snapshotOf } from "../../shared/history.ts";
import type { NodeHealth } from "../../shared/states.ts";
import { driverNodeOf } from "../drivers/driver-node.ts";
import type { DriverNode } from "../drivers/interfaces.ts";
import type { OperationContext } from "../operations/operation.ts";
import { syncPower } from "../operations/power.ts";
import type { PortRecord } from "../../shared/resources.ts";
import { STABLE_STATES } from "../states/machine.ts";
import type { PowerSyncPort } from "./power-sync.ts";

const FAILURES_KEY = "power_sync_failures";

/**
 * The power sync over the database and the nodes' own power interfaces. Reads take no lock (a node reserved
 * when listed is not listed); a correction is the power operation's, under the node's lock (`ops`).
 */
export function storePowerSyncPort(
  ops: OperationContext,
  isMine: (node: { uuid: string; conductor_group: string }) => boolean = () => true,
): PowerSyncPort {
  const { drivers } = ops;
  const { store } = ops.deps;
  const load = async (uuid: string) => {
    const node = await store.getNode(uuid);
    const hw = node ? drivers.get(node.driver) : undefined;
    if (!node || !hw) throw new Error(`node ${uuid} or its driver is gone`);
    return { node, hw, driverNode: await driverNodeOf(store, node) };
  };
  // The pass's snapshot: reading the BMC needs only what the listing already returned, so a node in sync costs
  // no query at all (two per node before: at 10^5 nodes they were most of a pass's database work). Writes
  // still go through the store's checks, so a node reserved since the listing is never overwritten, and a
  // power correction takes the node's lock first.
  const listed = new Map<string, DriverNode & { driver: string; health: NodeHealth | null }>();
  // what each BMC said of its health with the power state this pass (drivers that report one)
  const reported = new Map<string, NodeHealth | null>();
  const healthOn = ops.deps.config.powerSync.healthMonitoring;
  return {
    async listNodes() {
      listed.clear();
      reported.clear();
      const nodes = (await store.listNodes({ maintenance: false, reserved: false }, {})).filter(
        (n) => isMine(n) && STABLE_STATES.includes(n.provision_state) && n.provision_state !== "enroll",
      );
      const ports = portsByNode(await store.listPorts({}, {}));
      for (const n of nodes) {
        listed.set(n.uuid, {
          uuid: n.uuid,
          name: n.name,
          driver: n.driver,
          driver_info: n.driver_info,
          properties: n.properties,
          instance_info: n.instance_info,
          driver_internal_info: n.driver_internal_info,
          power_state: n.power_state,
          ports: ports.get(n.uuid) ?? [],
          health: n.health ?? null,
        });
      }
      return nodes.map((n) => ({
        uuid: n.uuid,
        powerState: n.power_state,
        syncFailures: Number(n.driver_internal_info[FAILURES_KEY] ?? 0),
        disablePowerOff: n.disable_power_off === true,
      }));
    },
    async getPower(node, options) {
      const snapshot = listed.get(node.uuid);
      const hw = snapshot ? drivers.get(snapshot.driver) : undefined;
      if (snapshot && hw) {
        if (!healthOn || !hw.power.getPowerStatus) return hw.power.getPowerState(snapshot, options);
        const status = await hw.power.getPowerStatus(snapshot, options);
        reported.set(node.uuid, status.health);
        return status.power;
      }
      const fresh = await load(node.uuid);
      return fresh.hw.power.getPowerState(fresh.driverNode, options);
    },
    async syncHealth(node) {
      const health = reported.get(node.uuid);
      const before = listed.get(node.uuid)?.health ?? null;
      if (health === undefined || health === before) return;
      try {
        const updated = await store.updateNode(node.uuid, { health }, { ifReservedBy: null });
        const event = `Node health status changed: health='${health ?? "None"}' (previously '${before ?? "None"}')`;
        const at = new Date();
        await store.addNodeHistory({
          ...historyState(snapshotOf(updated), at),
          uuid: randomUUID(),
          node_uuid: node.uuid,
          created_at: at.toISOString(),
          severity: health === "OK" || health === null ? "INFO" : "WARNING",
          event,
          event_type: "monitoring",
          conductor: ops.deps.holder,
          user: null,
          project: null,
          remote_address: null,
          request_id: null,
          changes: { health: [before, health] },
        });
        ops.deps.publish({ type: "health", node: node.uuid, health });
        if (health !== "OK" && health !== null)
          ops.deps.logger.warn({ node: node.uuid, health }, "node health status indicates a problem");
      } catch (error) {
        // a node reserved or deleted since the listing: the next pass sees it again
        ops.deps.logger.debug({ node: node.uuid, err: error }, "health status not recorded");
      }
    },
    async setPower(node, state) {
      // the lock's task carries its own signal; a pass stopping waits for the one correction in flight
      return (await syncPower(ops, node.uuid, state)) === "skipped" ? "skipped" : undefined;
    },
    async recordPowerState(uuid, state) {
      await store.updateNode(uuid, { power_state: state }, { ifReservedBy: null });
    },
    async recordFailure(uuid, count) {
      const node = await store.getNode(uuid);
      if (!node) return;
      await store.updateNode(
        uuid,
        { driver_internal_info: { ...node.driver_internal_info, [FAILURES_KEY]: count } },
        { ifReservedBy: null },
      );
    },
    async setMaintenance(uuid, reason) {
      await store.updateNode(
        uuid,
        { maintenance: true, maintenance_reason: reason, fault: "power failure", last_error: reason },
        { ifReservedBy: null },
      );
    },
  };
}

function portsByNode(ports: readonly PortRecord[]): Map<string, DriverNode["ports"]> {
  const byNode = new Map<string, DriverNode["ports"]>();
  for (const port of ports) {
    const list = byNode.get(port.node_uuid) ?? [];
    list.push({ address: port.address, pxe_enabled: port.pxe_enabled });
    byNode.set(port.node_uuid, list);
  }
  return byNode;
}
