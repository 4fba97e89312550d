import type { Logger } from "../../shared/log.ts";
import type { NodeRecord } from "../../shared/resources.ts";
import type { Store } from "../db/store.ts";
import { RAMDISK_PREPARED_BY } from "../flows/ramdisk.ts";
import { WAIT_STATES } from "../states/machine.ts";
import type { Membership } from "./membership.ts";

export interface TakeoverDeps {
  store: Store;
  membership: Membership;
  /** Frees a dead holder's lock and settles the node's in-flight work; true when the node was failed. */
  takeOver(uuid: string, deadHolder: string, cause: string): Promise<boolean>;
  logger: Logger;
}

/**
 * Finds nodes this conductor owns that are locked by a conductor that is no longer alive (crashed, or
 * restarted under a new identity) and takes them over. Returns the uuids whose lock was freed.
 */
export async function takeOverOrphans(deps: TakeoverDeps): Promise<string[]> {
  // NOTE: nodes are read before members: a lock seen here was taken by a conductor that registered before
  // the member list is read, so a newcomer's fresh lock is never mistaken for an orphan.
  const reserved = await deps.store.listNodeSummaries({ reserved: true }, {});
  await deps.membership.refresh();
  const hostnames = new Map(deps.membership.all().map((r) => [r.identity, r.hostname]));
  const taken: string[] = [];
  for (const node of reserved) {
    const holder = node.reservation;
    if (holder === null || deps.membership.isLiveIdentity(holder) || !deps.membership.owns(node)) continue;
    const previous = hostnames.get(holder);
    const cause =
      previous === deps.membership.hostname
        ? "The conductor restarted"
        : `Conductor ${previous ?? holder} stopped heartbeating`;
    const failed = await deps.takeOver(node.uuid, holder, cause);
    deps.logger.warn(
      { node: node.uuid, deadHolder: holder, failed },
      "took over a node from a dead conductor",
    );
    taken.push(node.uuid);
  }
  return taken;
}

/**
 * Is the node waiting on boot configuration written by a conductor that is gone (not this one, not alive)?
 * Such a node is this conductor's to adopt once it owns it; until then its timeout is not applied.
 */
export function awaitsAdoption(
  node: Pick<NodeRecord, "provision_state" | "driver_internal_info">,
  membership: Pick<Membership, "identity" | "isLiveIdentity">,
): boolean {
  const preparer = node.driver_internal_info[RAMDISK_PREPARED_BY];
  return (
    WAIT_STATES.includes(node.provision_state) &&
    typeof preparer === "string" &&
    preparer !== membership.identity &&
    !membership.isLiveIdentity(preparer)
  );
}

export interface AdoptionDeps {
  store: Store;
  membership: Membership;
  /** Re-writes the node's boot configuration here and restarts its wait; false when it could not. */
  adoptWaiting(uuid: string): Promise<boolean>;
  logger: Logger;
}

/**
 * Nodes this conductor owns that wait for their agent on boot configuration a dead conductor wrote: adopted
 * (kept waiting, boot files re-written here). A node whose preparer is alive (a rebalance, not a death)
 * is left alone: its files still work, and that conductor redirects the agent here.
 * Call after takeOverOrphans (which refreshes the members and frees locks dead conductors left).
 */
export async function adoptWaitingNodes(deps: AdoptionDeps): Promise<string[]> {
  const adopted: string[] = [];
  for (const state of WAIT_STATES) {
    for (const node of await deps.store.listNodes({ provision_state: state, reserved: false }, {})) {
      if (!deps.membership.owns(node) || !awaitsAdoption(node, deps.membership)) continue;
      if (!(await deps.adoptWaiting(node.uuid))) continue;
      deps.logger.warn(
        { node: node.uuid, state, previous: node.driver_internal_info[RAMDISK_PREPARED_BY] },
        "adopted a node waiting for its agent: boot configuration re-written here",
      );
      adopted.push(node.uuid);
    }
  }
  return adopted;
}
