import { z } from "zod";

/** Ironic's node history severities. */
export const HistorySeverity = z.enum(["INFO", "WARNING", "ERROR"]);

/**
 * One entry of a node's history: Ironic's fields (uuid, created_at, severity, event, event_type, conductor,
 * user) and Anvil's own (project, remote_address, request_id, changes), never a secret.
 */
export const NodeHistoryRecord = z.object({
  uuid: z.string(),
  node_uuid: z.string(),
  created_at: z.string(),
  severity: HistorySeverity,
  /** What happened, in a sentence. */
  event: z.string(),
  /** What kind: "update", "provisioning", "power", "maintenance", "traits", "create"... */
  event_type: z.string(),
  conductor: z.string(),
  /** Who asked (null: the conductor on its own, e.g. a timeout). */
  user: z.string().nullable(),
  project: z.string().nullable(),
  remote_address: z.string().nullable(),
  request_id: z.string().nullable(),
  /** What changed (secrets masked). */
  changes: z.unknown().nullable(),
  /**
   * 1.115 (entries stored before read null): the node's provision state and target at the event, and the
   * whole seconds since it entered the state it was in (Ironic's now - provision_updated_at); for a
   * transition, the state it ended in and how long the state it left lasted.
   */
  state: z.string().nullable().default(null),
  target_provision_state: z.string().nullable().default(null),
  duration_seconds: z.number().int().nonnegative().nullable().default(null),
});
export type NodeHistoryRecord = z.infer<typeof NodeHistoryRecord>;

/** Where a node's provisioning stood at an event: its state, target and since when (provision_updated_at). */
export interface ProvisionSnapshot {
  state: string | null;
  target: string | null;
  since: string | null;
}

/** The 1.115 fields of an entry made at `at` for a node in `snapshot` (a node gone: all null). */
export function historyState(
  snapshot: ProvisionSnapshot | null,
  at: Date,
): Pick<NodeHistoryRecord, "state" | "target_provision_state" | "duration_seconds"> {
  const since = snapshot?.since ? Date.parse(snapshot.since) : Number.NaN;
  return {
    state: snapshot?.state ?? null,
    target_provision_state: snapshot?.target ?? null,
    duration_seconds: Number.isFinite(since) ? Math.max(0, Math.floor((at.getTime() - since) / 1000)) : null,
  };
}

/** A node record's provision snapshot. */
export const snapshotOf = (node: {
  provision_state: string;
  target_provision_state: string | null;
  provision_updated_at: string | null;
}): ProvisionSnapshot => ({
  state: node.provision_state,
  target: node.target_provision_state,
  since: node.provision_updated_at,
});
