import type { Store } from "../db/store.ts";
import { driverNodeOf } from "../drivers/driver-node.ts";
import type { DriverRegistry } from "../drivers/hardware-type.ts";
import { STABLE_STATES } from "../states/machine.ts";
import type { PowerSyncPort } from "./power-sync.ts";

const FAILURES_KEY = "power_sync_failures";

/** The power sync over the database and the nodes' own power interfaces. */
export function storePowerSyncPort(
  store: Store,
  drivers: DriverRegistry,
  isMine: (node: { uuid: string; conductor_group: string }) => boolean = () => true,
): PowerSyncPort {
  const load = async (uuid: string) => {
    const node = await store.getNode(uuid);
    const hw = node ? drivers.get(node.driver) : undefined;
    if (!node || !hw) throw new Error(`node ${uuid} or its driver is gone`);
    return { node, hw, driverNode: await driverNodeOf(store, node) };
  };
  return {
    async listNodes() {
      const nodes = await store.listNodes({ maintenance: false }, {});
      return nodes
        .filter(
          (n) =>
            n.reservation === null &&
            isMine(n) &&
            STABLE_STATES.includes(n.provision_state) &&
            n.provision_state !== "enroll",
        )
        .map((n) => ({
          uuid: n.uuid,
          powerState: n.power_state,
          syncFailures: Number(n.driver_internal_info[FAILURES_KEY] ?? 0),
        }));
    },
    async getPower(node, options) {
      const { hw, driverNode } = await load(node.uuid);
      return hw.power.getPowerState(driverNode, options);
    },
    async setPower(node, state, options) {
      const { hw, driverNode } = await load(node.uuid);
      await hw.power.setPowerState(driverNode, state, options);
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
