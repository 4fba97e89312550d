import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { z } from "zod";
import type { Page } from "../db/store.ts";
import { authorize, type PolicyName } from "../auth/policy.ts";
import { ConductorError } from "../errors.ts";
import { baseUrl } from "./context.ts";
import { FieldsQuery, parseQuery, type PageQuery } from "./query.ts";
import { listParams, sendCollection } from "./resource-view.ts";

type IdentParams = { Params: { ident: string } };

/**
 * A stored document's read and delete routes under /v1/`path` (an Ironic controller's get_all, get_one and
 * delete): the list and its /detail with Ironic's limit, marker, sort_key/sort_dir, fields and detail; one by
 * its ident; DELETE. Creating and patching stay with each resource: their bodies and rules differ.
 */
export interface DocumentRoutes<T extends { uuid: string }, Q extends typeof PageQuery, S> {
  /** The collection's path under /v1, also its list's key: "deploy_templates". */
  path: string;
  /** The microversion that brought the resource: below it a read is 404 and a write 405, with Ironic's text. */
  since?: { minor: number; what: string };
  query: Q;
  sortable: readonly string[];
  /** What a list without detail shows (Ironic's DEFAULT_RETURN_FIELDS). */
  listFields: readonly string[];
  /** The policy check made before the request is read; a list's returns the scope it leaves (a project). */
  authorize(request: FastifyRequest, action: "list" | "get" | "delete"): S;
  list(scope: S, query: z.infer<Q>, page: Page): Promise<T[]>;
  /** The record `ident` names, for a show or a delete. @throws NotFound, PolicyForbidden */
  find(request: FastifyRequest, ident: string, action: "get" | "delete"): Promise<T>;
  remove(record: T): Promise<void>;
  view(request: FastifyRequest, record: T, fields?: readonly string[]): Record<string, unknown>;
}

/** The system rules of a resource without owners: a list or a show needs its `get` rule, a delete `delete`. */
export function systemRules(resource: "chassis" | "deploy_template" | "inspection_rule") {
  return (request: FastifyRequest, action: "list" | "get" | "delete"): void => {
    const rule: PolicyName = `baremetal:${resource}:${action === "list" ? "get" : action}`;
    authorize(rule, request.identity);
  };
}

export function documentRoutes<T extends { uuid: string }, Q extends typeof PageQuery, S>(
  app: FastifyInstance,
  routes: DocumentRoutes<T, Q, S>,
): void {
  const { path, since } = routes;
  if (since) {
    app.addHook("onRequest", async (request) => {
      if (request.apiMinor >= since.minor) return;
      const status = request.method === "GET" ? 404 : 405;
      throw new ConductorError(status, `The API version does not allow ${since.what}`);
    });
  }
  async function list(request: FastifyRequest, reply: FastifyReply, detailPath: boolean): Promise<void> {
    const scope = routes.authorize(request, "list");
    const { query, page, limit, detail } = listParams(routes.query, request, {
      detailPath,
      sortable: routes.sortable,
    });
    const items = await routes.list(scope, query, page);
    const fields = query.fields ?? (detail ? undefined : routes.listFields);
    const views = items.map((item) => routes.view(request, item, fields));
    const at = detailPath ? `${path}/detail` : path;
    await sendCollection(request, reply, { key: path, items, views, limit, path: at });
  }

  app.get(`/v1/${path}`, (request, reply) => list(request, reply, false));
  app.get(`/v1/${path}/detail`, (request, reply) => list(request, reply, true));

  app.get<IdentParams>(`/v1/${path}/:ident`, async (request) => {
    routes.authorize(request, "get");
    const { fields } = parseQuery(FieldsQuery, request.query);
    return routes.view(request, await routes.find(request, request.params.ident, "get"), fields);
  });

  app.delete<IdentParams>(`/v1/${path}/:ident`, async (request, reply) => {
    routes.authorize(request, "delete");
    await routes.remove(await routes.find(request, request.params.ident, "delete"));
    await reply.code(204).send();
  });
}

/** A create's answer: 201 with the new resource's Location and its view. */
export async function sendCreated(
  request: FastifyRequest,
  reply: FastifyReply,
  created: { path: string; view: Record<string, unknown> },
): Promise<void> {
  await reply
    .code(201)
    .header("Location", `${baseUrl(request)}/v1/${created.path}`)
    .send(created.view);
}
