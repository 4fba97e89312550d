import type { NodeRecord } from "../../shared/resources.ts";
import type { ProvisionState } from "../../shared/states.ts";
import type { Store } from "../db/store.ts";
import { normalizeMac, isMac } from "../drivers/boot/mac.ts";
import { WAIT_STATES } from "../states/machine.ts";
import type { AgentDirectory, AgentNode } from "./directory.ts";
import { KeyedMutex } from "./keyed-mutex.ts";

/** States in which a node may be looked up by its agent (Ironic's LOOKUP_ALLOWED_STATES, plus fast track). */
const IN_FLIGHT: readonly ProvisionState[] = ["inspecting", "cleaning", "deploying", "rescuing"];
const FAST_TRACK: readonly ProvisionState[] = ["enroll", "manageable", "available"];

/**
 * driver_internal_info flag of a node auto-discovery enrolled from its agent's hello, until the conductor has
 * its inventory: its agent may be looked up (and reconnect) in `enroll` meanwhile.
 */
export const DISCOVERY_AWAITS_AGENT = "discovery_awaits_agent";

export function lookupAllowed(node: NodeRecord, fastTrack: boolean): boolean {
  const state = node.provision_state;
  return (
    WAIT_STATES.includes(state) ||
    IN_FLIGHT.includes(state) ||
    (fastTrack && FAST_TRACK.includes(state)) ||
    (state === "enroll" && node.driver_internal_info[DISCOVERY_AWAITS_AGENT] === true)
  );
}

/** Enrolls a machine no node has (auto-discovery); resolves with the new node's uuid, or null if it did not. */
export type EnrollDiscovered = (machine: {
  macs: string[];
  bmc_address: string | null;
}) => Promise<string | null>;

export interface StoreDirectoryOptions {
  fastTrack: boolean;
  /** Present when auto-discovery is on. */
  enrollDiscovered?: EnrollDiscovered;
}

/** The agent gateway's view of the database: MAC lookup, token records and, optionally, discovery. */
export function storeDirectory(store: Store, options: StoreDirectoryOptions): AgentDirectory {
  // NOTE: one discovery at a time per conductor: a machine's hellos racing (a reconnect, two NICs dialling)
  // must find the node the first one enrolled, not make a second; the unique port address guards the rest
  const discoveries = new KeyedMutex();
  const { enrollDiscovered } = options;
  const directory: AgentDirectory = {
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
  if (enrollDiscovered === undefined) return directory;
  directory.discover = (hello) =>
    discoveries.run("discovery", async (): Promise<AgentNode | null> => {
      const enrolled = await directory.lookupByMacs(hello.macs);
      if (enrolled !== null) return enrolled;
      const macs = hello.macs.filter(isMac).map(normalizeMac);
      for (const address of macs) {
        // a known node that expects no agent now: not a machine to discover
        if ((await store.listPorts({ address }, { limit: 1 })).length > 0) return null;
      }
      if (macs.length === 0) return null;
      const uuid = await enrollDiscovered({ macs, bmc_address: hello.bmc_address });
      return uuid === null ? null : directory.lookupByMacs(macs);
    });
  return directory;
}
