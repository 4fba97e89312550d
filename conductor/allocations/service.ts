import { randomUUID } from "node:crypto";
import type { AllocationCreateBody } from "../../shared/api.ts";
import type { AllocationRecord, NodeRecord } from "../../shared/resources.ts";
import { Conflict, Invalid, NotFound } from "../errors.ts";
import type { Store } from "../db/store.ts";
import { TRANSIENT_STATES, WAIT_STATES } from "../states/machine.ts";

/** A new allocation's record from its API body, before any node is claimed for it. */
export function newAllocationRecord(body: AllocationCreateBody): AllocationRecord {
  return {
    uuid: body.uuid ?? randomUUID(),
    name: body.name ?? null,
    state: "allocating",
    node_uuid: null,
    resource_class: body.resource_class ?? null,
    traits: body.traits ?? [],
    candidate_nodes: body.candidate_nodes ?? (body.node ? [body.node] : []),
    spec: body.spec ?? null,
    last_error: null,
    extra: body.extra ?? {},
    owner: body.owner ?? null,
    created_at: new Date().toISOString(),
    updated_at: null,
  };
}

/** How often, and how far apart, a claim is tried again while its only matching nodes are locked. */
export const LOCKED_RETRY = { attempts: 20, intervalMs: 500 };

/** The reservation endpoint: picks a node atomically, at request time. */
export class AllocationService {
  private readonly retries = new Set<NodeJS.Timeout>();

  constructor(
    private readonly store: Store,
    private readonly retry: { attempts: number; intervalMs: number } = LOCKED_RETRY,
  ) {}

  /** Cancels the claims still waiting for a locked node (the conductor stops). */
  stop(): void {
    for (const timer of this.retries) clearTimeout(timer);
    this.retries.clear();
  }

  /**
   * Creates the allocation and processes it at once: the answer is `active` or `error`, never a race; or,
   * when the only nodes that match are locked by an action in progress (a power change just after
   * `provide`), `allocating`, and the claim is tried again until they are free, as Ironic's conductor retries
   * a locked node.
   */
  async create(body: AllocationCreateBody): Promise<AllocationRecord> {
    if (!body.resource_class && !body.node) {
      throw new Invalid("Either resource_class or node must be set when creating an allocation.");
    }
    const candidates = await this.candidateUuids(body.candidate_nodes ?? []);
    const record = newAllocationRecord(body);
    if (body.candidate_nodes) record.candidate_nodes = candidates;
    const allocation = await this.store.createAllocation(record);
    return this.process(allocation, this.retry.attempts);
  }

  /**
   * Whether a node that would match is merely locked now (available, unclaimed, reserved). Asked only when a
   * claim found nothing, and kept to one row: a race loser pays one indexed read, not a list. Candidate nodes
   * are looked at one by one (the first 100), so other reserved nodes cannot crowd them out.
   */
  private async lockedCandidates(allocation: AllocationRecord): Promise<boolean> {
    const waits = (node: NodeRecord | null): boolean =>
      node !== null &&
      node.reservation !== null &&
      node.provision_state === "available" &&
      node.instance_uuid === null &&
      !node.maintenance &&
      (allocation.resource_class === null || node.resource_class === allocation.resource_class);
    if (allocation.candidate_nodes.length > 0) {
      for (const uuid of allocation.candidate_nodes.slice(0, 100))
        if (waits(await this.store.getNode(uuid))) return true;
      return false;
    }
    const locked = await this.store.listNodes(
      {
        provision_state: "available",
        associated: false,
        reserved: true,
        maintenance: false,
        ...(allocation.resource_class ? { resource_class: allocation.resource_class } : {}),
        ...(allocation.owner ? { project: allocation.owner } : {}),
      },
      { limit: 1 },
    );
    return locked.length > 0;
  }

  private later(allocation: AllocationRecord, attemptsLeft: number): void {
    const timer = setTimeout(() => {
      this.retries.delete(timer);
      void this.process(allocation, attemptsLeft - 1).catch(() => undefined);
    }, this.retry.intervalMs);
    timer.unref();
    this.retries.add(timer);
  }

  /**
   * The candidate nodes as UUIDs, in the order given, as Ironic stores them; any that name no node make the
   * request a 400 with Ironic's text (`check_node_list`), before an allocation exists. @throws Invalid
   */
  private async candidateUuids(idents: readonly string[]): Promise<string[]> {
    const unique = [...new Set(idents)];
    const found = new Map<string, string>();
    const missing: string[] = [];
    for (const ident of unique) {
      const node = await this.store.getNode(ident);
      if (node) found.set(ident, node.uuid);
      else missing.push(ident);
    }
    if (missing.length > 0) throw new Invalid(`Nodes cannot be found: ${missing.join(", ")}`);
    return idents.map((ident) => found.get(ident) ?? ident);
  }

  private async process(allocation: AllocationRecord, attemptsLeft: number): Promise<AllocationRecord> {
    // deleted while it waited: nothing to do
    if (attemptsLeft < this.retry.attempts && !(await this.store.getAllocation(allocation.uuid)))
      return allocation;
    const node = await this.store.claimNode(allocation.uuid, {
      resourceClass: allocation.resource_class,
      traits: allocation.traits,
      candidateNodes: allocation.candidate_nodes,
      spec: allocation.spec,
      project: allocation.owner,
    });
    if (!node && attemptsLeft > 0 && (await this.lockedCandidates(allocation))) {
      this.later(allocation, attemptsLeft);
      return allocation;
    }
    if (!node) {
      const what = allocation.resource_class
        ? `the resource class ${allocation.resource_class}`
        : `the candidate nodes ${allocation.candidate_nodes.join(", ")}`;
      const filters = [
        allocation.traits.length ? `traits ${allocation.traits.join(", ")}` : "",
        allocation.spec ? "the requested spec" : "",
      ].filter(Boolean);
      return this.store.updateAllocation(allocation.uuid, {
        state: "error",
        last_error: `Failed to process allocation ${allocation.uuid}: no available nodes match ${what}${filters.length ? " and " + filters.join(" and ") : ""}.`,
      });
    }
    return this.store.updateAllocation(allocation.uuid, { state: "active", node_uuid: node.uuid });
  }

  /** Deletes the allocation and frees its node (not while the node is being deployed). */
  async delete(ident: string): Promise<void> {
    const allocation = await this.store.getAllocation(ident);
    if (!allocation) throw new NotFound(`Allocation ${ident} could not be found.`);
    if (allocation.node_uuid) {
      const node = await this.store.getNode(allocation.node_uuid);
      if (node) {
        if (TRANSIENT_STATES.includes(node.provision_state) || WAIT_STATES.includes(node.provision_state)) {
          throw new Conflict(
            `Cannot remove allocation ${allocation.uuid} from node ${node.uuid} in state ${node.provision_state}.`,
          );
        }
        if (node.reservation !== null) {
          throw new Conflict(
            `Node ${node.uuid} is locked by host ${node.reservation}, please retry after the current operation is completed.`,
          );
        }
        if (node.allocation_uuid === allocation.uuid) {
          await this.store.updateNode(
            node.uuid,
            { instance_uuid: null, allocation_uuid: null },
            { ifReservedBy: null },
          );
        }
      }
    }
    await this.store.deleteAllocation(allocation.uuid);
  }
}
