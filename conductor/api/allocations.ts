import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { AllocationCreateBody, ResourceName } from "../../shared/api.ts";
import { type ApiDeps, baseUrl, viewContext } from "./context.ts";
import { badRequest, pyRepr } from "./errors.ts";
import { applyJsonPatch, type PatchRules } from "./json-patch.ts";
import { ALLOCATION_JSON_FIELDS, checkStoredJson } from "./limits.ts";
import { AllocationListQuery, FieldsQuery, collection, effectiveLimit, parseQuery } from "./query.ts";
import { renderJson } from "./render.ts";
import { allocationView } from "./views.ts";
import type { Identity } from "../auth/identity.ts";
import { checkAllocationPolicy, listScope, visibleNode } from "../auth/node-access.ts";
import { NodeNotFound } from "../db/store.ts";
import { PolicyForbidden, allowed, authorize } from "../auth/policy.ts";

const AllocationPatch = z
  .array(
    z
      .object({
        op: z.enum(["add", "replace", "remove"]),
        path: z.string().regex(/^\/(name|extra|owner)(\/.*)?$/, "Only name, extra and owner can be updated"),
        value: z.unknown().optional(),
      })
      .strict(),
  )
  .min(1);

const PATCH_RULES: PatchRules = {
  writable: new Set(["name", "extra", "owner"]),
  objectFields: new Set(["extra"]),
};

/**
 * Every node an allocation names (its backfill node, its candidates) must be one the caller can see; one it
 * cannot is answered as a missing node, 400 as Ironic's allocation create answers NodeNotFound (candidates all
 * at once, as its check_node_list: "Nodes cannot be found: a, b").
 * @throws Invalid
 */
async function checkNamedNodes(
  deps: ApiDeps,
  who: Identity,
  named: { node?: string | undefined; candidates: readonly string[] },
): Promise<void> {
  const hidden = async (ident: string): Promise<NodeNotFound | undefined> => {
    try {
      await visibleNode(deps, who, ident);
      return undefined;
    } catch (error) {
      if (error instanceof NodeNotFound) return error;
      throw error;
    }
  };
  if (named.node !== undefined) {
    const missing = await hidden(named.node);
    if (missing) throw badRequest(missing.message);
  }
  const missing: string[] = [];
  for (const ident of new Set(named.candidates)) if (await hidden(ident)) missing.push(ident);
  if (missing.length > 0) throw badRequest(`Nodes cannot be found: ${missing.join(", ")}`);
}

/**
 * Ironic's texts for a body its ALLOCATION_SCHEMA (jsonschema, "Schema error for allocation: …") or its name
 * check refuses, which clients match on ("is too long", "does not match", "invalid name"); other issues keep
 * the shared wording. @throws Invalid
 */
function parseAllocationBody(body: unknown): AllocationCreateBody {
  const parsed = AllocationCreateBody.safeParse(body);
  if (parsed.success) return parsed.data;
  const raw = (typeof body === "object" && body !== null ? body : {}) as Record<string, unknown>;
  for (const issue of parsed.error.issues) {
    const [field, index] = issue.path;
    const value = typeof index === "number" ? (raw[String(field)] as unknown[])[index] : raw[String(field)];
    if (field === "name" && typeof value === "string")
      throw badRequest(`Cannot create allocation with invalid name '${value}'`);
    if (issue.code === "too_big" && typeof value === "string")
      throw badRequest(`Schema error for allocation: ${pyRepr(value)} is too long`);
    if (field === "traits" && typeof value === "string" && issue.code === "invalid_format")
      throw badRequest(
        `Schema error for allocation: ${pyRepr(value)} is not valid under any of the given schemas. Possible root cause: ${pyRepr(value)} does not match '^CUSTOM_[A-Z0-9_]+$'`,
      );
  }
  throw parsed.error;
}

/** Allocations: the reservation endpoint for compute services. */
export function allocationsPlugin(deps: ApiDeps) {
  return async (app: FastifyInstance): Promise<void> => {
    app.post("/v1/allocations", async (request, reply) => {
      const body = parseAllocationBody(request.body);
      authorize("baremetal:allocation:create", request.identity);
      if (!allowed("baremetal:allocation:create_restricted", request.identity)) {
        // a project allocates for itself, and so only picks nodes it owns or leases
        const project = request.identity.project;
        if (project === null || (body.owner && body.owner !== project))
          throw new PolicyForbidden("baremetal:allocation:create_restricted");
        body.owner = project;
      }
      checkStoredJson(body, ALLOCATION_JSON_FIELDS, deps.config.api);
      await checkNamedNodes(deps, request.identity, {
        node: body.node,
        candidates: body.candidate_nodes ?? [],
      });
      const allocation = await deps.allocations.create(body);
      await reply
        .code(201)
        .header("Location", `${baseUrl(request)}/v1/allocations/${allocation.uuid}`)
        .send(allocationView(allocation, viewContext(request, deps)));
    });

    app.get("/v1/allocations", async (request, reply) => {
      const query = parseQuery(AllocationListQuery, request.query);
      const scope = listScope("allocation", request.identity, query.owner);
      const nodeUuid =
        query.node === undefined ? undefined : (await visibleNode(deps, request.identity, query.node)).uuid;
      const limit = effectiveLimit(query.limit);
      const allocations = await deps.store.listAllocations(
        {
          node_uuid: nodeUuid,
          resource_class: query.resource_class,
          state: query.state,
          owner: scope.project ?? query.owner,
        },
        { limit, marker: query.marker, sortKey: query.sort_key, sortDir: query.sort_dir },
      );
      const ctx = viewContext(request, deps);
      const body = collection({
        key: "allocations",
        items: allocations,
        views: allocations.map((a) => allocationView(a, ctx, { fields: query.fields })),
        limit,
        url: `${baseUrl(request)}/v1/allocations`,
        query: request.query as Record<string, unknown>,
      });
      await reply.type("application/json; charset=utf-8").send(renderJson(body, "allocations"));
    });

    app.get<{ Params: { ident: string } }>("/v1/allocations/:ident", async (request) => {
      const { fields } = parseQuery(FieldsQuery, request.query);
      const allocation = checkAllocationPolicy("baremetal:allocation:get", request.identity, {
        ident: request.params.ident,
        allocation: await deps.store.getAllocation(request.params.ident),
      });
      return allocationView(allocation, viewContext(request, deps), { fields });
    });

    app.patch<{ Params: { ident: string } }>("/v1/allocations/:ident", async (request) => {
      const patch = AllocationPatch.parse(request.body);
      const allocation = checkAllocationPolicy("baremetal:allocation:update", request.identity, {
        ident: request.params.ident,
        allocation: await deps.store.getAllocation(request.params.ident),
      });
      const { doc, touched } = applyJsonPatch(allocation, patch, PATCH_RULES);
      const changes: { name?: string | null; owner?: string | null; extra?: Record<string, unknown> } = {};
      if (touched.has("extra")) {
        changes.extra = doc.extra === null ? {} : z.record(z.string(), z.unknown()).parse(doc.extra);
        checkStoredJson(changes, ALLOCATION_JSON_FIELDS, deps.config.api);
      }
      if (touched.has("name")) changes.name = doc.name === null ? null : ResourceName.parse(doc.name);
      if (touched.has("owner")) {
        if (doc.owner !== null && typeof doc.owner !== "string") throw badRequest("owner must be a string");
        changes.owner = doc.owner;
      }
      const updated = await deps.store.updateAllocation(allocation.uuid, changes);
      return allocationView(updated, viewContext(request, deps));
    });

    app.delete<{ Params: { ident: string } }>("/v1/allocations/:ident", async (request, reply) => {
      checkAllocationPolicy("baremetal:allocation:delete", request.identity, {
        ident: request.params.ident,
        allocation: await deps.store.getAllocation(request.params.ident),
      });
      await deps.allocations.delete(request.params.ident);
      await reply.code(204).send();
    });
  };
}
