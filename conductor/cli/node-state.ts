import { z } from "zod";
import type { AnvilClient } from "./client.ts";

/** The node fields the CLI reads (the API sends many more; they pass through untouched). */
export const NodeState = z.looseObject({
  uuid: z.string(),
  name: z.string().nullable().optional(),
  provision_state: z.string(),
  target_provision_state: z.string().nullable().optional(),
  power_state: z.string().nullable().optional(),
  target_power_state: z.string().nullable().optional(),
  last_error: z.string().nullable().optional(),
  reservation: z.string().nullable().optional(),
  driver_internal_info: z.record(z.string(), z.unknown()).optional(),
});
export type NodeState = z.infer<typeof NodeState>;

export function nodePath(ident: string): string {
  return `/v1/nodes/${encodeURIComponent(ident)}`;
}

/** @throws ApiFault (404 for an unknown node) */
export async function fetchNode(client: AnvilClient, ident: string): Promise<NodeState> {
  return NodeState.parse(await client.get(nodePath(ident)));
}

export function nodeLabel(node: Pick<NodeState, "uuid" | "name">): string {
  return node.name ?? node.uuid;
}
