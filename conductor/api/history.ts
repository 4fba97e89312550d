import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import { type NodeHistoryRecord, type ProvisionSnapshot, snapshotOf } from "../../shared/history.ts";
import type { NodeRecord } from "../../shared/resources.ts";
import { clientAddress } from "../auth/fastify-auth.ts";
import { checkNodePolicies } from "../auth/node-access.ts";
import { maskPatch } from "../history/redact.ts";
import type { Actor, HistoryRecorder } from "../history/recorder.ts";
import { type ApiDeps, baseUrl } from "./context.ts";
import { notFound } from "./errors.ts";
import { PageQuery, collection, effectiveLimit, parseQuery } from "./query.ts";

/** Node history arrived in Ironic's API 1.78. */
const HISTORY_MINOR = 78;
/** Ironic's MINOR_113_NODE_HISTORY_PROJECT: the detailed list names the caller's project. */
const HISTORY_PROJECT_MINOR = 113;
/** Ironic's MINOR_115_NODE_HISTORY_FIELDS: state, target_provision_state, duration_seconds. */
const HISTORY_FIELDS_MINOR = 115;
const HistoryQuery = PageQuery.pick({ limit: true, marker: true, detail: true }).strict();

type Params = { Params: { ident: string; event?: string } };

const actorOf = (request: FastifyRequest): Actor => ({
  user: request.identity?.user ?? null,
  project: request.identity?.project ?? null,
  remoteAddress: clientAddress(request),
  requestId: String(request.id),
});

/** How each node-changing route reads in the history. */
function describe(
  route: string,
  method: string,
  request: FastifyRequest,
): { eventType: string; event: string; changes?: unknown } | null {
  const body = request.body as Record<string, unknown> | undefined;
  const params = request.params as { trait?: string };
  const who = request.identity?.user ?? "anonymous";
  const key = `${method} ${route}`;
  switch (key) {
    case "PATCH /v1/nodes/:ident": {
      const paths = Array.isArray(body)
        ? body.map((op: { path?: unknown }) => String(op.path)).join(", ")
        : "";
      return { eventType: "update", event: `Updated by ${who}: ${paths}`, changes: maskPatch(body) };
    }
    case "PUT /v1/nodes/:ident/states/provision":
      return {
        eventType: "provisioning",
        event: `Provision action "${String(body?.target)}" requested by ${who}`,
        changes: maskPatch(body),
      };
    case "PUT /v1/nodes/:ident/states/power":
      return {
        eventType: "power",
        event: `Power "${String(body?.target)}" requested by ${who}`,
        changes: maskPatch(body),
      };
    case "PUT /v1/nodes/:ident/maintenance":
      return { eventType: "maintenance", event: `Maintenance set by ${who}`, changes: maskPatch(body ?? {}) };
    case "DELETE /v1/nodes/:ident/maintenance":
      return { eventType: "maintenance", event: `Maintenance cleared by ${who}` };
    // the image URL stays out: an operator's URL may carry credentials or a presigned query
    case "POST /v1/nodes/:ident/vmedia":
      return {
        eventType: "vmedia",
        event: `Virtual media ${String(body?.device_type)} attach requested by ${who}`,
      };
    case "DELETE /v1/nodes/:ident/vmedia":
    case "DELETE /v1/nodes/:ident/vmedia/:device":
      return { eventType: "vmedia", event: `Virtual media detach requested by ${who}` };
    case "PUT /v1/nodes/:ident/management/boot_device":
      return { eventType: "boot_device", event: `Boot device set by ${who}`, changes: maskPatch(body) };
    case "PUT /v1/nodes/:ident/traits":
    case "DELETE /v1/nodes/:ident/traits":
      return {
        eventType: "traits",
        event: `Traits ${method === "PUT" ? "set" : "removed"} by ${who}`,
        changes: body,
      };
    case "PUT /v1/nodes/:ident/traits/:trait":
    case "DELETE /v1/nodes/:ident/traits/:trait":
      return {
        eventType: "traits",
        event: `Trait ${params.trait ?? ""} ${method === "PUT" ? "added" : "removed"} by ${who}`,
      };
    default:
      return null;
  }
}

/**
 * The history entry of POST /v1/nodes, stored in the node's own transaction (so a failed create leaves none,
 * and it is readable as soon as the 201 is): the caller logs it (`history.log`) once the node is stored.
 */
export function createdEntry(
  history: HistoryRecorder,
  request: FastifyRequest,
  node: NodeRecord,
): NodeHistoryRecord {
  const who = request.identity?.user ?? "anonymous";
  // the body as the client sent it, masked (by the recorder) as every entry's changes are
  return history.entry({
    node: node.uuid,
    snapshot: snapshotOf(node),
    eventType: "create",
    event: `Node created by ${who}`,
    changes: request.body,
    actor: actorOf(request),
  });
}

function view(
  record: NodeHistoryRecord,
  at: { base: string; minor: number },
  detail: "list" | "detail" | "show",
): Record<string, unknown> {
  const { base, minor } = at;
  const href = `/nodes/${record.node_uuid}/history/${record.uuid}`;
  const out: Record<string, unknown> = {
    uuid: record.uuid,
    created_at: record.created_at,
    severity: record.severity,
    event: record.event,
  };
  if (detail !== "list")
    Object.assign(out, { event_type: record.event_type, conductor: record.conductor, user: record.user });
  // one entry shows its project at every version (Anvil's own, with where the request came from)
  if (detail === "show" || (detail === "detail" && minor >= HISTORY_PROJECT_MINOR))
    out.project = record.project;
  if (detail !== "list" && minor >= HISTORY_FIELDS_MINOR)
    Object.assign(out, {
      state: record.state ?? null,
      target_provision_state: record.target_provision_state ?? null,
      duration_seconds: record.duration_seconds ?? null,
    });
  if (detail === "show")
    Object.assign(out, {
      project: record.project,
      remote_address: record.remote_address,
      request_id: record.request_id,
      changes: record.changes,
    });
  out.links = [
    { href: `${base}/v1${href}`, rel: "self" },
    { href: `${base}${href}`, rel: "bookmark" },
  ];
  return out;
}

/**
 * Node history inside the nodes plugin: a hook records every successful change made through a node route
 * (who, from where, which request, what), and GET /v1/nodes/{node}/history[/detail|/{event}] serves it.
 */
export function nodeHistory(app: FastifyInstance, deps: ApiDeps): void {
  const { history } = deps;
  if (!history) return;

  // a request's entry is dated when it arrived (so it sorts before the transitions it caused), and names
  // the node as it was then (a PATCH may rename it)
  const arrived = new WeakMap<FastifyRequest, { at: Date; node?: string; snapshot?: ProvisionSnapshot }>();
  app.addHook("preHandler", async (request) => {
    // a create's entry is written by its handler, with the node
    if (request.method === "GET" || request.routeOptions.url === "/v1/nodes") return;
    const ident = (request.params as { ident?: string }).ident;
    const node = ident === undefined ? null : await deps.store.getNode(ident).catch(() => null);
    arrived.set(request, { at: new Date(), node: node?.uuid, snapshot: node ? snapshotOf(node) : undefined });
    const route = request.routeOptions.url;
    // the background work this request starts is attributed to its caller
    if (node && (route === "/v1/nodes/:ident/states/provision" || route === "/v1/nodes/:ident/states/power"))
      history.noteActor(node.uuid, actorOf(request));
  });

  app.addHook("onResponse", async (request, reply) => {
    const route = request.routeOptions.url;
    if (request.method === "GET" || reply.statusCode >= 400 || route === undefined || route === "/v1/nodes")
      return;
    const what = describe(route, request.method, request);
    const seen = arrived.get(request);
    if (!what) {
      if (request.method === "DELETE" && route === "/v1/nodes/:ident") {
        // its history went with it: this line is the record
        deps.logger.info(
          { node: seen?.node, user: request.identity?.user, request_id: request.id },
          "node deleted",
        );
        if (seen?.node) history.forget(seen.node);
      }
      return;
    }
    const node = seen?.node;
    if (!node) return;
    // the node's provisioning when the request arrived (a new node's is read when its entry is made)
    await history.record({ node, ...what, actor: actorOf(request), at: seen?.at, snapshot: seen?.snapshot });
  });

  async function list(request: FastifyRequest<Params>, reply: FastifyReply, detail: boolean): Promise<void> {
    if (request.apiMinor < HISTORY_MINOR) throw notFound(`The resource could not be found.`);
    const query = parseQuery(HistoryQuery, request.query);
    const node = await checkNodePolicies((i) => deps.store.getNode(i), request.identity, {
      ident: request.params.ident,
      rules: ["baremetal:node:history:get"],
    });
    const limit = effectiveLimit(query.limit);
    const records = await deps.store.listNodeHistory(node.uuid, { limit, marker: query.marker });
    const base = baseUrl(request);
    await reply.send(
      collection({
        key: "history",
        items: records,
        views: records.map((r) =>
          view(r, { base, minor: request.apiMinor }, detail || query.detail === true ? "detail" : "list"),
        ),
        limit,
        url: `${base}/v1/nodes/${node.uuid}/history${detail ? "/detail" : ""}`,
        query: request.query as Record<string, unknown>,
      }),
    );
  }

  app.get<Params>("/v1/nodes/:ident/history", (request, reply) => list(request, reply, false));
  app.get<Params>("/v1/nodes/:ident/history/detail", (request, reply) => list(request, reply, true));
  app.get<Params>("/v1/nodes/:ident/history/:event", async (request) => {
    if (request.apiMinor < HISTORY_MINOR) throw notFound(`The resource could not be found.`);
    z.object({})
      .strict()
      .parse(request.query ?? {});
    const node = await checkNodePolicies((i) => deps.store.getNode(i), request.identity, {
      ident: request.params.ident,
      rules: ["baremetal:node:history:get"],
    });
    const record = await deps.store.getNodeHistory(node.uuid, request.params.event ?? "");
    if (!record) throw notFound(`Node history record ${request.params.event ?? ""} could not be found.`);
    return view(record, { base: baseUrl(request), minor: request.apiMinor }, "show");
  });
}
