import { randomUUID } from "node:crypto";
import {
  type NodeHistoryRecord,
  type ProvisionSnapshot,
  historyState,
  snapshotOf,
} from "../../shared/history.ts";
import type { Logger } from "../../shared/log.ts";
import type { Store } from "../db/store.ts";
import type { ConductorEvent } from "../events/hub.ts";
import { maskDeep } from "./redact.ts";

/** Who caused a change: the API caller, or nobody (the conductor on its own). */
export interface Actor {
  user: string | null;
  project: string | null;
  remoteAddress: string | null;
  requestId: string | null;
}

export const CONDUCTOR_ACTOR: Actor = { user: null, project: null, remoteAddress: null, requestId: null };

export interface HistoryEntry {
  node: string;
  event: string;
  eventType: string;
  severity?: NodeHistoryRecord["severity"];
  changes?: unknown;
  actor?: Actor;
  /** When it happened (default now): a request's entry is dated when the request arrived. */
  at?: Date;
  /** The node's provisioning at the event (default: read from the store when the entry is made). */
  snapshot?: ProvisionSnapshot;
}

/** The stored form of a history entry made by `conductor` at `at`: its changes masked at any depth. */
export function historyRecord(entry: HistoryEntry, conductor: string, at: Date): NodeHistoryRecord {
  const actor = entry.actor ?? CONDUCTOR_ACTOR;
  return {
    uuid: randomUUID(),
    node_uuid: entry.node,
    created_at: at.toISOString(),
    severity: entry.severity ?? "INFO",
    event: entry.event,
    event_type: entry.eventType,
    conductor,
    user: actor.user,
    project: actor.project,
    remote_address: actor.remoteAddress,
    request_id: actor.requestId,
    changes: entry.changes === undefined ? null : maskDeep(entry.changes),
    ...historyState(entry.snapshot ?? null, at),
  };
}

/**
 * Keeps every change to a node as Ironic's node history (one store row and one structured log line each).
 * API changes come with their caller; provision and power outcomes, which happen later in the background,
 * are attributed to whoever asked for the operation that produced them.
 */
export class HistoryRecorder {
  /** The caller behind each node's current operation (bounded: one entry per node). */
  private readonly lastActor = new Map<string, Actor>();

  constructor(
    private readonly deps: {
      store: Pick<Store, "addNodeHistory" | "getNode">;
      logger: Logger;
      conductor: string;
      now?: () => Date;
    },
  ) {}

  /** Remembers who started the operation now running on a node. */
  noteActor(node: string, actor: Actor): void {
    this.lastActor.set(node, actor);
  }

  forget(node: string): void {
    this.lastActor.delete(node);
  }

  /** Stores and logs one entry; a node deleted meanwhile only gets the log line. Never throws. */
  async record(entry: HistoryEntry): Promise<void> {
    const snapshot =
      entry.snapshot ??
      (await this.deps.store
        .getNode(entry.node)
        .then((node) => (node ? snapshotOf(node) : null))
        .catch(() => null));
    const record = this.entry(snapshot === null ? entry : { ...entry, snapshot });
    this.log(record);
    try {
      await this.deps.store.addNodeHistory(record);
    } catch (error) {
      // the node is gone (deleted while its work ran): the log line above is the record
      this.deps.logger.debug({ err: error, node: entry.node }, "history entry not stored");
    }
  }

  /**
   * The stored form of an entry (its changes masked), for a caller that stores it with the change itself (a
   * node's create, in the node's transaction) and then calls `log`. Its state fields come from
   * `entry.snapshot` (null without one).
   */
  entry(entry: HistoryEntry): NodeHistoryRecord {
    return historyRecord(entry, this.deps.conductor, entry.at ?? this.deps.now?.() ?? new Date());
  }

  /** The entry's structured log line (every entry has one, stored or not). */
  log(record: NodeHistoryRecord): void {
    this.deps.logger.info({ history: record }, "node history");
  }

  /** The conductor's own events: provision transitions and power outcomes. */
  async onEvent(event: ConductorEvent): Promise<void> {
    const actor = this.lastActor.get(event.node);
    if (event.type === "provision") {
      const to = String(event.provision_state);
      const failed = event.event === "fail" || to.endsWith("failed") || to === "error";
      let text = `Provision state changed from "${String(event.from)}" to "${to}" (${String(event.event)})`;
      if (failed) {
        const node = await this.deps.store.getNode(event.node).catch(() => null);
        if (node?.last_error) text = node.last_error;
      }
      await this.record({
        node: event.node,
        event: text,
        eventType: "provisioning",
        severity: failed ? "ERROR" : "INFO",
        changes: { from: event.from, event: event.event, to, target: event.target_provision_state ?? null },
        actor,
        // the state reached, and how long the state left lasted (entered at from_since)
        snapshot: {
          state: to,
          target: typeof event.target_provision_state === "string" ? event.target_provision_state : null,
          since: typeof event.from_since === "string" ? event.from_since : null,
        },
      });
    } else if (event.type === "power") {
      const error = typeof event.error === "string" ? event.error : null;
      await this.record({
        node: event.node,
        event: error ?? `Power state is now "${String(event.power_state)}"`,
        eventType: "power",
        severity: error ? "ERROR" : "INFO",
        changes: { power_state: event.power_state ?? null },
        actor,
      });
    }
  }
}
