import type { Logger } from "../../shared/log.ts";
import type { NodeRecord } from "../../shared/resources.ts";
import type { ReservedNode, Store } from "../db/store.ts";
import { INSTANCE_PREPARED_BY } from "../drivers/boot/instance-boot.ts";
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
 *
 * `everyHolder` (at start) reads every lock, so that one held by an identity no conductor row names (data
 * from before conductors registered) is freed too. Otherwise (each heartbeat) only the locks of registered
 * identities that are not alive are read, by equality on the reservation index: a conductor registers before
 * it locks anything, so no other holder can appear while this process runs.
 */
export async function takeOverOrphans(
  deps: TakeoverDeps,
  options: { everyHolder?: boolean } = {},
): Promise<string[]> {
  let reserved: ReservedNode[];
  if (options.everyHolder) {
    // NOTE: nodes are read before members: a lock seen here was taken by a conductor that registered before
    // the member list is read, so a newcomer's fresh lock is never mistaken for an orphan.
    const locked = await deps.store.listNodeSummaries({ reserved: true }, {}, [
      "reservation",
      "conductor_group",
    ]);
    await deps.membership.refresh();
    reserved = locked.filter((n): n is ReservedNode => n.reservation !== null);
  } else {
    // only identities read as dead: a newcomer is alive (registered) and never asked about
    await deps.membership.refresh();
    reserved = await deps.store.listReservedBy(deps.membership.deadIdentities());
  }
  const hostnames = new Map(deps.membership.all().map((r) => [r.identity, r.hostname]));
  const taken: string[] = [];
  for (const node of reserved) {
    const holder = node.reservation;
    if (deps.membership.isLiveIdentity(holder) || !deps.membership.owns(node)) continue;
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

/** The identity that wrote the boot files the node depends on in its state, if any was recorded. */
function bootPreparer(node: Pick<NodeRecord, "provision_state" | "driver_internal_info">): unknown {
  if (WAIT_STATES.includes(node.provision_state)) return node.driver_internal_info[RAMDISK_PREPARED_BY];
  if (node.provision_state === "active") return node.driver_internal_info[INSTANCE_PREPARED_BY];
  return undefined;
}

/**
 * Does the node depend on boot files written by a conductor that is gone (not this one, not alive)? Such a
 * node is this conductor's to adopt once it owns it; until then a wait state's timeout is not applied.
 */
export function awaitsAdoption(
  node: Pick<NodeRecord, "provision_state" | "driver_internal_info">,
  membership: Pick<Membership, "identity" | "isLiveIdentity">,
): boolean {
  const preparer = bootPreparer(node);
  return (
    typeof preparer === "string" && preparer !== membership.identity && !membership.isLiveIdentity(preparer)
  );
}

export interface AdoptionDeps {
  store: Pick<Store, "listOrphanedBoots">;
  membership: Pick<Membership, "generation" | "owns" | "identity" | "isLiveIdentity" | "alive">;
  /** Writes the node's boot configuration again here (wait states: and restarts the wait); false when it could not. */
  adoptBoot(uuid: string): Promise<boolean>;
  logger: Logger;
}

/**
 * Nodes this conductor owns whose boot files a dead conductor wrote: adopted (wait states kept and their files
 * re-written here, active nodes' instance boot re-written). A node whose preparer is alive (a rebalance, not
 * a death) is left alone: its files still work, and that conductor redirects the agent here.
 * Returns the nodes adopted and how many could not be (locked: the next pass tries again).
 */
export async function adoptOrphanedBoots(
  deps: AdoptionDeps,
): Promise<{ adopted: string[]; pending: number }> {
  const adopted: string[] = [];
  let pending = 0;
  // only nodes whose files a conductor outside the live set wrote, found from indexes (a fleet of 10^5 active
  // nodes is not read); the checks below are the rule itself, the store's answer only narrows it
  const live = [deps.membership.identity, ...deps.membership.alive().map((r) => r.identity)];
  const candidates = await deps.store.listOrphanedBoots({ waitStates: WAIT_STATES, live });
  for (const node of candidates) {
    if (!deps.membership.owns(node) || !awaitsAdoption(node, deps.membership)) continue;
    if (!(await deps.adoptBoot(node.uuid))) {
      pending += 1;
      continue;
    }
    deps.logger.warn(
      { node: node.uuid, state: node.provision_state, previous: bootPreparer(node) },
      "took over a node's boot configuration from a dead conductor",
    );
    adopted.push(node.uuid);
  }
  return { adopted, pending };
}

/**
 * Runs adoptOrphanedBoots only when it can find something: after the live conductors changed (a death is
 * what orphans boot files), or while an earlier pass left locked nodes behind. Listing every active node on
 * each heartbeat would cost a fleet of 10^5 nodes dearly for nothing.
 * Call after takeOverOrphans (which refreshes the members and frees locks dead conductors left).
 */
export class BootAdoption {
  private seenGeneration = -1;
  private retry = true;

  constructor(private readonly deps: AdoptionDeps) {}

  async run(): Promise<string[]> {
    const generation = this.deps.membership.generation;
    if (generation === this.seenGeneration && !this.retry) return [];
    this.seenGeneration = generation;
    const { adopted, pending } = await adoptOrphanedBoots(this.deps);
    this.retry = pending > 0;
    return adopted;
  }
}
