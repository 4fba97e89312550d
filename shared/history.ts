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
});
export type NodeHistoryRecord = z.infer<typeof NodeHistoryRecord>;
