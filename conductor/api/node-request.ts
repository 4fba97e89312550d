import type { FastifyRequest } from "fastify";
import type { JsonPatch } from "../../shared/api.ts";
import type { NodeRecord } from "../../shared/resources.ts";
import { authorizeNodeLink, checkNodePolicies } from "../auth/node-access.ts";
import { NotAcceptable } from "../errors.ts";
import type { PolicyName } from "../auth/policy.ts";
import type { OperationSpec } from "../operations/operation.ts";
import type { ApiDeps } from "./context.ts";
import { badRequest } from "./errors.ts";
import { NODE_VIEW_FIELDS, nodeFieldAllowed } from "./views.ts";

export type IdentParams = { Params: { ident: string } };

/** Route options that declare the operation a route calls (read by the forwarding to the node's owner). */
export function calls(operation: OperationSpec): { config: { operation: OperationSpec } } {
  return { config: { operation } };
}

/** The node a request names, if the caller passes every rule (Ironic's 403 vs 404). */
export function nodeFor(
  deps: ApiDeps,
  request: FastifyRequest<IdentParams>,
  ...rules: PolicyName[]
): Promise<NodeRecord> {
  return checkNodePolicies((ident) => deps.store.getNode(ident), request.identity, {
    ident: request.params.ident,
    rules,
  });
}

/** @throws ApiError(400) naming fields a node view does not have */
export function checkFields(fields: readonly string[] | undefined): void {
  const unknown = (fields ?? []).filter((f) => !NODE_VIEW_FIELDS.has(f));
  if (unknown.length) throw badRequest(`Field(s) "${unknown.join(", ")}" are not valid`);
}

/**
 * Fields Anvil gates on create and PATCH as Ironic's reject_fields_in_newer_versions and
 * reject_patch_in_newer_versions do: the node fields of 1.83 and later (older fields keep their own checks).
 */
const GATED_FIELDS = ["parent_node", "firmware_interface", "disable_power_off", "instance_name"] as const;

/** A create body naming a field newer than the request's microversion (null counts as absent). @throws 406 */
export function rejectNewerCreateFields(body: Record<string, unknown>, minor: number): void {
  for (const field of GATED_FIELDS) {
    if (body[field] !== undefined && body[field] !== null && !nodeFieldAllowed(field, minor))
      throw new NotAcceptable("Request not acceptable.");
  }
}

/** A patch adding or replacing a field newer than the request's microversion. @throws 406 */
export function rejectNewerPatchFields(patch: JsonPatch, minor: number): void {
  for (const field of GATED_FIELDS) {
    const touched = patch.some((op) => op.path === `/${field}` && op.op !== "remove");
    if (touched && !nodeFieldAllowed(field, minor)) throw new NotAcceptable("Request not acceptable.");
  }
}

/**
 * Ironic's authorize_node_link for a node's `parent_node` (1.83): the parent, by uuid or name, must be a node
 * the caller sees with the same owner, and not the node itself; every refusal is the same 400 text.
 * @returns the parent's uuid @throws Invalid (400)
 */
export async function resolveParentNode(
  deps: ApiDeps,
  request: FastifyRequest,
  link: { from: Pick<NodeRecord, "owner" | "lessee">; to: string; self?: string },
): Promise<string> {
  const parent = await authorizeNodeLink(
    deps,
    { who: request.identity, rule: "baremetal:node:get" },
    { from: link.from, to: link.to, field: "parent_node" },
  );
  if (parent.uuid === link.self)
    throw badRequest(`Unable to apply the requested parent_node '${link.to}'. Requested value was invalid.`);
  return parent.uuid;
}
