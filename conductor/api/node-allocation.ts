import type { FastifyInstance, FastifyRequest } from "fastify";
import type { AllocationRecord } from "../../shared/resources.ts";
import { checkAllocationPolicy, visibleNode } from "../auth/node-access.ts";
import { authorize } from "../auth/policy.ts";
import { NodeNotFound } from "../db/store.ts";
import type { ApiDeps } from "./context.ts";
import { notFound } from "./errors.ts";
import type { IdentParams } from "./node-request.ts";
import { FieldsQuery, parseQuery } from "./query.ts";
import { viewContext } from "./context.ts";
import { allocationView } from "./views.ts";

/** Ironic's allow_allocations: the node's allocation sub-resource is there from 1.52. */
const NODE_ALLOCATION_MINOR = 52;

function requireVersion(request: FastifyRequest): void {
  if (request.apiMinor < NODE_ALLOCATION_MINOR) throw notFound("The API version does not allow allocations");
}

/** The allocation holding the node `ident` names, as Ironic's NodeAllocationController finds it. */
async function allocationOf(deps: ApiDeps, request: FastifyRequest<IdentParams>): Promise<AllocationRecord> {
  const { ident } = request.params;
  const node = await visibleNode(deps, request.identity, ident).catch((error: unknown) => {
    if (error instanceof NodeNotFound) authorize("baremetal:node:get", request.identity);
    throw error;
  });
  const [allocation] = await deps.store.listAllocations({ node_uuid: node.uuid }, { limit: 1 });
  if (allocation === undefined) throw notFound(`Allocation for node ${ident} was not found`);
  return allocation;
}

/** GET and DELETE /v1/nodes/{id}/allocation (1.52): the node's one allocation. */
export function nodeAllocationRoutes(app: FastifyInstance, deps: ApiDeps): void {
  const path = "/v1/nodes/:ident/allocation";
  app.get<IdentParams>(path, async (request) => {
    requireVersion(request);
    const { fields } = parseQuery(FieldsQuery, request.query);
    const allocation = checkAllocationPolicy("baremetal:allocation:get", request.identity, {
      ident: request.params.ident,
      allocation: await allocationOf(deps, request),
    });
    return allocationView(allocation, viewContext(request, deps), { fields });
  });
  app.delete<IdentParams>(path, async (request, reply) => {
    requireVersion(request);
    const allocation = checkAllocationPolicy("baremetal:allocation:delete", request.identity, {
      ident: request.params.ident,
      allocation: await allocationOf(deps, request),
    });
    // the same path as DELETE /v1/allocations/{id}: the node's instance is released under its lock
    await deps.allocations.delete(allocation.uuid);
    await reply.code(204).send();
  });
}
