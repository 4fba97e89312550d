import type { NodeRecord } from "../../shared/resources.ts";
import type { ProvisionState } from "../../shared/states.ts";
import type { Store } from "../db/store.ts";
import { normalizeMac, isMac } from "../drivers/boot/mac.ts";
import { WAIT_STATES } from "../states/machine.ts";
import type { AgentDirectory } from "./directory.ts";

/** States in which a node may be looked up by its agent (Ironic's LOOKUP_ALLOWED_STATES, plus fast track). */
const IN_FLIGHT: readonly ProvisionState[] = ["inspecting", "cleaning", "deploying", "rescuing"];
const FAST_TRACK: readonly ProvisionState[] = ["enroll", "manageable", "available"];

export function lookupAllowed(node: NodeRecord, fastTrack: boolean): boolean {
  const state = node.provision_state;
  return (
    WAIT_STATES.includes(state) || IN_FLIGHT.includes(state) || (fastTrack && FAST_TRACK.includes(state))
  );
}

/** The agent gateway's view of the database: MAC lookup and token records. */
export function storeDirectory(store: Store, options: { fastTrack: boolean }): AgentDirectory {
  return {
    async lookupByMacs(macs) {
      for (const raw of macs) {
        if (!isMac(raw)) continue;
        const [port] = await store.listPorts({ address: normalizeMac(raw) }, { limit: 1 });
        if (!port) continue;
        const node = await store.getNode(port.node_uuid);
        if (node && lookupAllowed(node, options.fastTrack)) {
          const retired = node.driver_internal_info.agent_retired_boot_id;
          return {
            uuid: node.uuid,
            fastTrack: options.fastTrack && FAST_TRACK.includes(node.provision_state),
            conductorGroup: node.conductor_group,
            ...(typeof retired === "string" ? { retiredBootId: retired } : {}),
          };
        }
      }
      return null;
    },
    tokenRecord: (uuid) => store.getAgentToken(uuid),
    saveToken: (uuid, record) => store.setAgentToken(uuid, record),
  };
}
