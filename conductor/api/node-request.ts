import type { FastifyRequest } from "fastify";
import type { NodeRecord } from "../../shared/resources.ts";
import { checkNodePolicies } from "../auth/node-access.ts";
import type { PolicyName } from "../auth/policy.ts";
import type { OperationSpec } from "../operations/operation.ts";
import type { ApiDeps } from "./context.ts";
import { badRequest } from "./errors.ts";
import { NODE_VIEW_FIELDS } from "./views.ts";

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
