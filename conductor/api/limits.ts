import type { ConductorConfig } from "../config.ts";
import { checkJsonFields } from "../../shared/json-shape.ts";

export type ApiLimits = ConductorConfig["api"];

/** Free-form JSON fields of each resource: bounded in depth and size wherever the API writes them. */
export const NODE_JSON_FIELDS = [
  "driver_info",
  "properties",
  "instance_info",
  "extra",
  "network_data",
] as const;
export const PORT_JSON_FIELDS = ["local_link_connection", "extra"] as const;
export const PORTGROUP_JSON_FIELDS = ["extra", "properties"] as const;
export const ALLOCATION_JSON_FIELDS = ["extra"] as const;

/**
 * Checks the free-form fields of a resource about to be stored (a create, or the result of a PATCH).
 * instance_info.configdrive is left out of the size: it is bounded by the body limit of the request that
 * carried it (64 MiB for a provision request, as Ironic). @throws JsonLimitError
 */
export function checkStoredJson(
  record: Record<string, unknown>,
  fields: readonly string[],
  limits: ApiLimits,
): void {
  let measured = record;
  const info = record.instance_info;
  if (
    fields.includes("instance_info") &&
    typeof info === "object" &&
    info !== null &&
    "configdrive" in info
  ) {
    const { configdrive: _configdrive, ...rest } = info as Record<string, unknown>;
    measured = { ...record, instance_info: rest };
  }
  checkJsonFields(measured, { fields, maxDepth: limits.maxJsonDepth, maxBytes: limits.maxFieldBytes });
}
