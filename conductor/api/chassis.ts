import { randomUUID } from "node:crypto";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { ChassisCreateBody, ChassisRecord } from "../../shared/chassis.ts";
import { JsonPatch } from "../../shared/api.ts";
import { NotAcceptable } from "../errors.ts";
import { listScope, redactNodeView } from "../auth/node-access.ts";
import { authorize } from "../auth/policy.ts";
import { NODE_SORT_KEYS } from "../db/store.ts";
import { type ApiDeps, baseUrl, viewContext } from "./context.ts";
import { badRequest, notFound } from "./errors.ts";
import { applyJsonPatch } from "./json-patch.ts";
import { checkStoredJson } from "./limits.ts";
import { documentRoutes, sendCreated, systemRules } from "./document-routes.ts";
import { PageQuery } from "./query.ts";
import { listParams, resourceView, sendCollection } from "./resource-view.ts";
import { NODE_VIEW_FIELDS, nodeView } from "./views.ts";

/** Ironic's DEFAULT_RETURN_FIELDS of a chassis list. */
const LIST_FIELDS = ["uuid", "description"];
const SORTABLE = ["id", "uuid", "created_at"];
const PATCH_RULES = { writable: new Set(["description", "extra"]), objectFields: new Set(["extra"]) };

const ChassisListQuery = PageQuery.strict();
const ChassisNodesQuery = PageQuery.extend({
  associated: PageQuery.shape.detail,
  maintenance: PageQuery.shape.detail,
}).strict();

type IdentParams = { Params: { ident: string } };

/** Microversion 1.25 lets a node leave its chassis (Ironic's allow_remove_chassis_uuid). */
const REMOVE_CHASSIS_UUID = 25;

/**
 * A node's chassis_uuid on create or PATCH: the chassis must exist (Ironic answers its ChassisNotFound as a
 * 400 there, a 404 being wrong for a request on a node), and unsetting it needs 1.25.
 * @throws Invalid, NotAcceptable
 */
export async function checkNodeChassis(
  deps: Pick<ApiDeps, "store">,
  change: { chassis_uuid?: string | null; previous: string | null; minor: number },
): Promise<void> {
  const { chassis_uuid: wanted, previous, minor } = change;
  if (wanted === undefined) return;
  if (wanted === null) {
    if (previous !== null && minor < REMOVE_CHASSIS_UUID) throw new NotAcceptable("Request not acceptable.");
    return;
  }
  if (!(await deps.store.getChassis(wanted))) throw badRequest(`Chassis ${wanted} could not be found.`);
}

async function loadChassis(deps: ApiDeps, uuid: string): Promise<ChassisRecord> {
  const chassis = await deps.store.getChassis(uuid);
  if (!chassis) throw notFound(`Chassis ${uuid} could not be found.`);
  return chassis;
}

/** Chassis (Ironic 1.1): groups of nodes; a chassis with nodes in it cannot be deleted. */
export function chassisPlugin(deps: ApiDeps) {
  return async (app: FastifyInstance): Promise<void> => {
    const view = (
      request: FastifyRequest,
      chassis: ChassisRecord,
      options: { fields?: readonly string[] } = {},
    ) =>
      resourceView(chassis, {
        ...options,
        base: baseUrl(request),
        path: `chassis/${chassis.uuid}`,
        subs: ["nodes"],
      });

    documentRoutes(app, {
      path: "chassis",
      query: ChassisListQuery,
      sortable: SORTABLE,
      listFields: LIST_FIELDS,
      authorize: systemRules("chassis"),
      list: (_scope, _query, page) => deps.store.listChassis(page),
      find: (_request, ident) => loadChassis(deps, ident),
      // a chassis with nodes in it stays (ChassisNotEmpty)
      remove: (chassis) => deps.store.deleteChassis(chassis.uuid),
      view: (request, chassis, fields) => view(request, chassis, { fields }),
    });

    app.post("/v1/chassis", async (request, reply) => {
      authorize("baremetal:chassis:create", request.identity);
      const body = ChassisCreateBody.parse(request.body);
      checkStoredJson(body, ["extra"], deps.config.api);
      const chassis = await deps.store.createChassis({
        uuid: body.uuid ?? randomUUID(),
        description: body.description ?? null,
        extra: body.extra ?? {},
        created_at: new Date().toISOString(),
        updated_at: null,
      });
      await sendCreated(request, reply, { path: `chassis/${chassis.uuid}`, view: view(request, chassis) });
    });

    app.patch<IdentParams>("/v1/chassis/:ident", async (request) => {
      authorize("baremetal:chassis:update", request.identity);
      const patch = JsonPatch.parse(request.body);
      const chassis = await loadChassis(deps, request.params.ident);
      const { doc, touched } = applyJsonPatch(chassis, patch, PATCH_RULES);
      if (doc.extra === null) doc.extra = {};
      const checked = ChassisRecord.parse(doc);
      checkStoredJson(checked, touched.has("extra") ? ["extra"] : [], deps.config.api);
      const updated = await deps.store.updateChassis(chassis.uuid, {
        description: checked.description,
        extra: checked.extra,
      });
      return view(request, updated);
    });

    /** GET /v1/chassis/{uuid}/nodes: the node list of one chassis (Ironic's NodesController from_chassis). */
    async function nodes(request: FastifyRequest<IdentParams>, reply: FastifyReply, detailPath: boolean) {
      const { query, page, limit, detail } = listParams(ChassisNodesQuery, request, {
        detailPath,
        sortable: NODE_SORT_KEYS,
      });
      const unknown = (query.fields ?? []).filter((f) => !NODE_VIEW_FIELDS.has(f));
      if (unknown.length) throw badRequest(`Field(s) "${unknown.join(", ")}" are not valid`);
      const scope = listScope("node", request.identity);
      const chassis = await loadChassis(deps, request.params.ident);
      const filter = { ...scope, chassis_uuid: chassis.uuid, associated: query.associated };
      const items = await deps.store.listNodes({ ...filter, maintenance: query.maintenance }, page);
      const ctx = viewContext(request, deps);
      const views = items.map((n) =>
        redactNodeView(nodeView(n, ctx, { fields: query.fields, detail }), request.identity, n),
      );
      const path = `chassis/${chassis.uuid}/nodes${detailPath ? "/detail" : ""}`;
      await sendCollection(request, reply, { key: "nodes", items, views, limit, path });
    }

    app.get<IdentParams>("/v1/chassis/:ident/nodes", (request, reply) => nodes(request, reply, false));
    app.get<IdentParams>("/v1/chassis/:ident/nodes/detail", (request, reply) => nodes(request, reply, true));
  };
}
