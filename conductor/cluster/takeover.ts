import type { Logger } from "../../shared/log.ts";
import type { Store } from "../db/store.ts";
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
