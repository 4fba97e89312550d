import { type JsonPatch, ResourceName } from "../../shared/api.ts";
import { NODE_LATER_FIELDS, NodeRecord, withLaterFields } from "../../shared/resources.ts";
import { restoreMaskedSecrets } from "../../shared/secrets.ts";
import { requireStrictBool } from "../../shared/strict-bool.ts";
import { refuseDeployImageCredentials } from "../drivers/boot/deploy-images.ts";
import { checkName } from "../operations/node-record.ts";
import { OBJECT_FIELDS, WRITABLE_FIELDS } from "../operations/update-node.ts";
import { badRequest } from "./errors.ts";
import { applyJsonPatch, type PatchRules } from "./json-patch.ts";
import { type ApiLimits, NODE_JSON_FIELDS, checkStoredJson } from "./limits.ts";

const PATCH_RULES: PatchRules = { writable: WRITABLE_FIELDS, objectFields: new Set(OBJECT_FIELDS) };

/** Serialised form of a field for change detection; a value too deep to serialise counts as changed. */
function fingerprint(value: unknown): string | symbol {
  try {
    return JSON.stringify(value);
  } catch {
    return Symbol("unserialisable");
  }
}

/**
 * Applies a JSON Patch to a node and returns the fields that changed. Pure but for validation.
 * @throws ApiError(400), JsonLimitError when a touched field ends up over a limit
 */
export function patchNode(node: NodeRecord, patch: JsonPatch, limits: ApiLimits): Partial<NodeRecord> {
  const { doc: patched, touched } = applyJsonPatch(
    withLaterFields(node, NODE_LATER_FIELDS),
    patch,
    PATCH_RULES,
  );
  for (const field of OBJECT_FIELDS) if (patched[field] === null) patched[field] = {};
  // a client that read masked secrets and sends them back must not overwrite the real ones (any depth)
  for (const field of ["driver_info", "instance_info"] as const) {
    if (touched.has(field)) restoreMaskedSecrets(patched[field], node[field]);
  }
  for (const key of ["maintenance", "protected", "retired"] as const)
    if (patched[key] === null) patched[key] = false;
  // the stock CLI sends booleans as strings ("False"): the one strict reader the policy check used too
  for (const key of ["maintenance", "protected", "retired", "automated_clean", "disable_power_off"] as const)
    if (touched.has(key) && patched[key] !== null) patched[key] = requireStrictBool(key, patched[key]);
  const checked = NodeRecord.safeParse(patched);
  if (!checked.success) {
    const issue = checked.error.issues[0];
    throw badRequest(`Invalid value for ${issue?.path.join(".") ?? "a field"}: ${issue?.message ?? ""}`);
  }
  if (touched.has("driver_info")) refuseDeployImageCredentials(checked.data.driver_info);
  if (checked.data.name !== null) {
    const name = ResourceName.safeParse(checked.data.name);
    if (!name.success) throw badRequest(`Invalid name: ${name.error.issues[0]?.message ?? ""}`);
    checkName(checked.data.name);
  }
  // only what the patch touched is checked: a field stored before the limits existed may stay as it is
  checkStoredJson(
    checked.data,
    NODE_JSON_FIELDS.filter((field) => touched.has(field)),
    limits,
  );
  const changes: Partial<NodeRecord> = {};
  for (const key of touched as Set<keyof NodeRecord>) {
    if (fingerprint(checked.data[key]) !== fingerprint(node[key])) {
      (changes as Record<string, unknown>)[key] = checked.data[key];
    }
  }
  // Ironic 1.104: a client that only knows instance_info's display_name (Nova) names the instance too
  const displayName = checked.data.instance_info.display_name;
  if (
    "instance_info" in changes &&
    !checked.data.instance_name &&
    typeof displayName === "string" &&
    displayName
  )
    changes.instance_name = displayName.slice(0, 255);
  return changes;
}
