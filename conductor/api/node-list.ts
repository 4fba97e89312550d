import type { FastifyReply, FastifyRequest } from "fastify";
import { listScope, redactNodeView } from "../auth/node-access.ts";
import { NODE_SORT_KEYS } from "../db/store.ts";
import { type ApiDeps, baseUrl, viewContext } from "./context.ts";
import { NotAcceptable } from "../errors.ts";
import { badRequest } from "./errors.ts";
import { checkFields } from "./node-request.ts";
import { NodeListQuery, collection, effectiveLimit, nextLink, parseQuery } from "./query.ts";
import { renderJson } from "./render.ts";
import { SHARD_MINOR } from "./shards.ts";
import { shownNodesPage, shownTextServes } from "./node-shown-page.ts";
import { PageBuffers } from "../page-buffers.ts";

/** Ironic's MINOR_104_NODE_INSTANCE_NAME. */
export const INSTANCE_NAME_MINOR = 104;
import { nodeView, shortListInSql, summaryColumnsFor, summaryIsEnough } from "./views.ts";

/** What every node page opens with, as text (the detail page written from the shown texts) and as bytes. */
const NODES_OPEN = '{"nodes":';
const NODES_OPEN_BYTES = Buffer.from(NODES_OPEN);

/**
 * GET /v1/nodes (`detail` false) and /v1/nodes/detail: a page of the nodes the caller may see. `buffers`: where
 * the detail pages written from the shown texts are written (one pool per app).
 */
export function listNodes(deps: ApiDeps, detail: boolean, buffers = new PageBuffers()) {
  return (request: FastifyRequest, reply: FastifyReply): Promise<void> =>
    listPage(deps, { request, reply, detail, buffers });
}

async function listPage(
  deps: ApiDeps,
  {
    request,
    reply,
    detail,
    buffers,
  }: { request: FastifyRequest; reply: FastifyReply; detail: boolean; buffers: PageBuffers },
): Promise<void> {
  const query = parseQuery(NodeListQuery, request.query);
  checkFields(query.fields);
  if (detail && query.fields)
    throw badRequest("Can not specify ?detail=True and fields in the same request.");
  if (query.sort_key && !(NODE_SORT_KEYS as readonly string[]).includes(query.sort_key)) {
    throw badRequest(`The sort_key value "${query.sort_key}" is an invalid field for sorting`);
  }
  checkChildParams(query, request.apiMinor);
  if ((query.shard !== undefined || query.sharded !== undefined) && request.apiMinor < SHARD_MINOR)
    throw new NotAcceptable(
      `Request not acceptable. The minimal required API version should be 1.${SHARD_MINOR}`,
    );
  // Ironic's check_allow_filter_by_instance_name
  if (query.instance_name !== undefined && request.apiMinor < INSTANCE_NAME_MINOR)
    throw new NotAcceptable("instance_name is not acceptable in this API version");
  const limit = effectiveLimit(query.limit);
  const showDetail = detail || query.detail === true;
  const scope = listScope("node", request.identity, query.owner);
  const filter = {
    ...scope,
    provision_state: query.provision_state,
    maintenance: query.maintenance,
    associated: query.associated,
    resource_class: query.resource_class,
    driver: query.driver,
    conductor_group: query.conductor_group,
    instance_uuid: query.instance_uuid,
    fault: query.fault,
    owner: query.owner,
    lessee: query.lessee,
    retired: query.retired,
    chassis_uuid: query.chassis_uuid,
    // Ironic lists children only when asked: by their parent, or with include_children
    parent_node: query.include_children === true ? undefined : query.parent_node,
    exclude_children: query.include_children !== true && query.parent_node === undefined,
    shard: query.shard,
    sharded: query.sharded,
    description_contains: query.description_contains,
    instance_name: query.instance_name,
  };
  const page = { limit, marker: query.marker, sortKey: query.sort_key, sortDir: query.sort_dir };
  const ctx = viewContext(request, deps);
  const url = `${baseUrl(request)}/v1/${detail ? "nodes/detail" : "nodes"}`;
  if (!showDetail && query.fields === undefined && shortListInSql(ctx.minor)) {
    // the stock CLI's `node list`: the database writes the page's JSON (no field of it is ever redacted)
    const built = await deps.store.listNodeSummaryJson(filter, page, ctx.baseUrl);
    const next = nextLink({
      count: built.count,
      last: built.lastUuid,
      limit,
      url,
      query: request.query as Record<string, unknown>,
    });
    const tail = next === null ? "}" : `,"next":${JSON.stringify(next)}}`;
    await reply
      .type("application/json; charset=utf-8")
      .send(Buffer.concat([NODES_OPEN_BYTES, built.json, Buffer.from(tail)]));
    return;
  }
  if (showDetail && query.fields === undefined && shownTextServes(ctx.minor)) {
    // the full form at the newest version: spliced from each node's stored shown text (node-shown-page.ts)
    let taken: Buffer | undefined;
    // written while the rows are good (listNodeShown's `use`): a text read as bytes is a view of a reused buffer
    const json = await deps.store.listNodeShown(filter, page, (rows) => {
      if (rows === null) return null;
      const next = nextLink({
        count: rows.length,
        last: rows.at(-1)?.uuid ?? null,
        limit,
        url,
        query: request.query as Record<string, unknown>,
      });
      const close = next === null ? "}" : `,"next":${JSON.stringify(next)}}`;
      return shownNodesPage(rows, {
        ctx,
        who: request.identity,
        open: NODES_OPEN,
        close,
        buffer: (size) => (taken = buffers.take(size)),
      });
    });
    if (json !== null) {
      // back to the pool once the socket has taken every byte of the response (never before: see PageBuffers)
      reply.raw.once("finish", () => {
        if (taken !== undefined) buffers.give(taken);
      });
      await reply.type("application/json; charset=utf-8").send(json);
      return;
    }
  }
  const nodes =
    !showDetail && summaryIsEnough(query.fields)
      ? await deps.store.listNodeSummaries(filter, page, summaryColumnsFor(query.fields))
      : await deps.store.listNodes(filter, page);
  const body = collection({
    key: "nodes",
    items: nodes,
    views: nodes.map((n) =>
      redactNodeView(nodeView(n, ctx, { fields: query.fields, detail: showDetail }), request.identity, n),
    ),
    limit,
    url,
    query: request.query as Record<string, unknown>,
  });
  await reply.type("application/json; charset=utf-8").send(renderJson(body, "nodes"));
}

/** 1.83 (child nodes): `?parent_node=` and `?include_children=` are 406 below it, as Ironic's. */
export const CHILD_NODES_MINOR = 83;

function checkChildParams(query: { parent_node?: string; include_children?: boolean }, minor: number): void {
  if ((query.parent_node !== undefined || query.include_children !== undefined) && minor < CHILD_NODES_MINOR)
    throw new NotAcceptable(
      `Request not acceptable. The minimal required API version should be 1.${CHILD_NODES_MINOR}`,
    );
}
