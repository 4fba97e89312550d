import { randomUUID } from "node:crypto";
import { changeVolume } from "../operations/volume.ts";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { z } from "zod";
import { JsonPatch } from "../../shared/api.ts";
import type { NodeRecord } from "../../shared/resources.ts";
import { isUuid } from "../../shared/uuid.ts";
import {
  VolumeConnectorCreateBody,
  VolumeConnectorRecord,
  VolumeTargetCreateBody,
  VolumeTargetRecord,
} from "../../shared/volume.ts";
import type { Identity } from "../auth/identity.ts";
import { canSeeNode, checkNodePolicies, checkNodeRule, listScope } from "../auth/node-access.ts";
import { allowed, authorize, type PolicyName } from "../auth/policy.ts";
import type { Page, VolumeFilter } from "../db/store.ts";
import { NodeNotFound } from "../db/store.ts";
import { type ApiDeps, baseUrl } from "./context.ts";
import { badRequest, notFound } from "./errors.ts";
import { applyJsonPatch } from "./json-patch.ts";
import { checkStoredJson } from "./limits.ts";
import { FieldsQuery, PageQuery, parseQuery } from "./query.ts";
import { listParams, resourceLinks, resourceView, sendCollection } from "./resource-view.ts";

/** Volume resources came with microversion 1.32; below it Ironic answers 404 for every method. */
export const VOLUME_VERSION = 32;

const VolumeListQuery = PageQuery.extend({ node: PageQuery.shape.marker }).strict();

const TARGET_PROPERTIES_REDACTED = {
  redacted_contents:
    "** Value redacted: Requires permission baremetal:volume:view_target_properties access. Permission denied. **",
};

type Stored = VolumeConnectorRecord | VolumeTargetRecord;

/** What differs between connectors and targets; the routes are the same. */
interface VolumeKind<R extends Stored> {
  path: "connectors" | "targets";
  /** as Ironic's messages name one ("Volume connector X could not be found.") */
  noun: string;
  listFields: readonly string[];
  sortable: readonly string[];
  writable: readonly string[];
  objectFields: readonly string[];
  record: z.ZodType<R>;
  create(body: unknown): R;
  get(deps: ApiDeps, uuid: string): Promise<R | null>;
  list(deps: ApiDeps, filter: VolumeFilter, page: Page): Promise<R[]>;
  insert(deps: ApiDeps, record: R): Promise<R>;
  update(deps: ApiDeps, uuid: string, patch: Partial<R>): Promise<R>;
  remove(deps: ApiDeps, uuid: string): Promise<void>;
  /** what a caller without view_target_properties sees */
  redact?(record: R, who: Identity): R;
}

const now = (): string => new Date().toISOString();

const CONNECTORS: VolumeKind<VolumeConnectorRecord> = {
  path: "connectors",
  noun: "Volume connector",
  listFields: ["uuid", "node_uuid", "type", "connector_id"],
  sortable: ["id", "uuid", "created_at", "updated_at", "node_uuid", "type", "connector_id"],
  writable: ["connector_id", "extra", "node_uuid", "type"],
  objectFields: ["extra"],
  record: VolumeConnectorRecord,
  create: (raw) => {
    const body = VolumeConnectorCreateBody.parse(raw);
    return {
      uuid: body.uuid ?? randomUUID(),
      node_uuid: body.node_uuid,
      type: body.type,
      connector_id: body.connector_id,
      extra: body.extra ?? {},
      created_at: now(),
      updated_at: null,
    };
  },
  get: (deps, uuid) => deps.store.getVolumeConnector(uuid),
  list: (deps, filter, page) => deps.store.listVolumeConnectors(filter, page),
  insert: (deps, record) => deps.store.createVolumeConnector(record),
  update: (deps, uuid, patch) => deps.store.updateVolumeConnector(uuid, patch),
  remove: (deps, uuid) => deps.store.deleteVolumeConnector(uuid),
};

const TARGETS: VolumeKind<VolumeTargetRecord> = {
  path: "targets",
  noun: "Volume target",
  listFields: ["uuid", "node_uuid", "volume_type", "boot_index", "volume_id"],
  sortable: ["id", "uuid", "created_at", "updated_at", "node_uuid", "boot_index"],
  writable: ["boot_index", "extra", "node_uuid", "properties", "volume_id", "volume_type"],
  objectFields: ["extra", "properties"],
  record: VolumeTargetRecord,
  create: (raw) => {
    const body = VolumeTargetCreateBody.parse(raw);
    return {
      uuid: body.uuid ?? randomUUID(),
      node_uuid: body.node_uuid,
      volume_type: body.volume_type,
      volume_id: body.volume_id,
      boot_index: body.boot_index,
      properties: body.properties ?? {},
      extra: body.extra ?? {},
      created_at: now(),
      updated_at: null,
    };
  },
  get: (deps, uuid) => deps.store.getVolumeTarget(uuid),
  list: (deps, filter, page) => deps.store.listVolumeTargets(filter, page),
  insert: (deps, record) => deps.store.createVolumeTarget(record),
  update: (deps, uuid, patch) => deps.store.updateVolumeTarget(uuid, patch),
  remove: (deps, uuid) => deps.store.deleteVolumeTarget(uuid),
  redact: (record, who) =>
    allowed("baremetal:volume:view_target_properties", who)
      ? record
      : { ...record, properties: { ...TARGET_PROPERTIES_REDACTED } },
};

/**
 * Ironic's check_volume_policy_and_retrieve: a missing resource is 404, one on a node the caller cannot see
 * is 404 too (its existence hidden), one it sees but may not act on is 403.
 */
async function loadVolume<R extends Stored>(
  deps: ApiDeps,
  kind: VolumeKind<R>,
  access: { uuid: string; who: Identity; rule: PolicyName },
): Promise<{ record: R; node: NodeRecord | null }> {
  const missing = notFound(`${kind.noun} ${access.uuid} could not be found.`);
  const record = isUuid(access.uuid) ? await kind.get(deps, access.uuid) : null;
  if (!record) throw missing;
  const node = await deps.store.getNode(record.node_uuid);
  const owners = node ?? { owner: null, lessee: null };
  if (!canSeeNode(access.who, owners)) throw missing;
  checkNodeRule(access.rule, access.who, owners);
  return { record, node };
}

/**
 * Ironic's authorize_node_link: moving a resource to another node needs that node visible to the caller and
 * with the same owner; whatever the reason, the answer is the same 400, so a node's existence is not disclosed.
 */
async function linkedNode(
  deps: ApiDeps,
  who: Identity,
  link: { node: NodeRecord | null; to: string },
): Promise<NodeRecord> {
  const refused = badRequest(
    `Unable to apply the requested node_uuid '${link.to}'. Requested value was invalid.`,
  );
  const next = await deps.store.getNode(link.to);
  if (!next || !canSeeNode(who, next) || next.owner !== (link.node?.owner ?? null)) throw refused;
  return next;
}

/** The routes of one volume resource kind, at /v1/volume/<kind> and under /v1/nodes/{ident}/volume/<kind>. */
function volumeRoutes<R extends Stored>(app: FastifyInstance, deps: ApiDeps, kind: VolumeKind<R>): void {
  const base = `/v1/volume/${kind.path}`;
  const action = kind.noun.toLowerCase();
  const view = (request: FastifyRequest, record: R, options: { fields?: readonly string[] } = {}) =>
    resourceView(kind.redact ? kind.redact(record, request.identity) : record, {
      ...options,
      base: baseUrl(request),
      path: `volume/${kind.path}/${record.uuid}`,
    });

  async function list(
    request: FastifyRequest,
    reply: FastifyReply,
    options: { parent?: string; detailPath: boolean },
  ): Promise<void> {
    const { query, page, limit, detail } = listParams(VolumeListQuery, request, {
      detailPath: options.detailPath,
      sortable: kind.sortable,
    });
    const ident = options.parent ?? query.node;
    let nodeUuid: string | undefined;
    if (ident !== undefined) {
      // Ironic's check_volume_list_policy: a node the caller cannot see is not found
      const node = await deps.store.getNode(ident);
      if (!node || !canSeeNode(request.identity, node)) throw new NodeNotFound(ident);
      nodeUuid = node.uuid;
    }
    const scope = listScope("volume", request.identity);
    const items = await kind.list(deps, { ...scope, node_uuid: nodeUuid }, page);
    const fields = query.fields ?? (detail ? undefined : kind.listFields);
    const path = `volume/${kind.path}${options.detailPath ? "/detail" : ""}`;
    const views = items.map((r) => view(request, r, { fields }));
    await sendCollection(request, reply, { key: kind.path, items, views, limit, path });
  }

  type NodeParams = { Params: { ident: string } };
  app.get(base, (request, reply) => list(request, reply, { detailPath: false }));
  app.get(`${base}/detail`, (request, reply) => list(request, reply, { detailPath: true }));
  app.get<NodeParams>(`/v1/nodes/:ident/volume/${kind.path}`, (request, reply) =>
    list(request, reply, { parent: request.params.ident, detailPath: false }),
  );
  // a single resource, or a change, through the node's path is refused (Ironic's MalformedRequestURI)
  const malformed = async (): Promise<never> => {
    throw badRequest("Malformed request URI.");
  };
  app.post(`/v1/nodes/:ident/volume/${kind.path}`, malformed);
  for (const method of ["GET", "PATCH", "DELETE"] as const) {
    app.route({ method, url: `/v1/nodes/:ident/volume/${kind.path}/:uuid`, handler: malformed });
  }

  type UuidParams = { Params: { uuid: string } };
  app.get<UuidParams>(`${base}/:uuid`, async (request) => {
    const { fields } = parseQuery(FieldsQuery, request.query);
    const { record } = await loadVolume(deps, kind, {
      uuid: request.params.uuid,
      who: request.identity,
      rule: "baremetal:volume:get",
    });
    return view(request, record, { fields });
  });

  app.post(base, async (request, reply) => {
    const record = kind.create(request.body);
    checkStoredJson(record, kind.objectFields, deps.config.api);
    // Ironic checks the rule against the node first, then says the node is not there (InvalidInput)
    const node = await deps.store.getNode(record.node_uuid);
    checkNodeRule("baremetal:volume:create", request.identity, node ?? { owner: null, lessee: null });
    if (!node) {
      throw badRequest(`Invalid input for field/attribute node_uuid. Value: '${record.node_uuid}'. `);
    }
    const made = await kind.insert(deps, record);
    await reply
      .code(201)
      .header("Location", `${baseUrl(request)}${base}/${made.uuid}`)
      .send(view(request, made));
  });

  app.patch<UuidParams>(`${base}/:uuid`, async (request) => {
    const patch = JsonPatch.parse(request.body);
    const { record, node } = await loadVolume(deps, kind, {
      uuid: request.params.uuid,
      who: request.identity,
      rule: "baremetal:volume:update",
    });
    for (const op of patch) {
      if (
        op.path === "/node_uuid" &&
        op.op !== "remove" &&
        !(typeof op.value === "string" && isUuid(op.value))
      )
        throw badRequest(`Expected a UUID for node_uuid, but received ${String(op.value)}.`);
    }
    const rules = { writable: new Set(kind.writable), objectFields: new Set(kind.objectFields) };
    const { doc, touched } = applyJsonPatch(record, patch, rules);
    for (const field of kind.objectFields) if (doc[field] === null) doc[field] = {};
    const checked = kind.record.parse(doc);
    checkStoredJson(
      checked,
      kind.objectFields.filter((f) => touched.has(f)),
      deps.config.api,
    );
    let target = node;
    if (checked.node_uuid !== record.node_uuid)
      target = await linkedNode(deps, request.identity, { node, to: checked.node_uuid });
    if (!target) throw new NodeNotFound(record.node_uuid);
    const changes: Record<string, unknown> = {};
    for (const field of touched) changes[field] = (checked as Record<string, unknown>)[field];
    const updated = await changeVolume(deps.provisioner, target, {
      action: `${action} update`,
      deleting: false,
      write: () => kind.update(deps, record.uuid, changes as Partial<R>),
    });
    return view(request, updated);
  });

  app.delete<UuidParams>(`${base}/:uuid`, async (request, reply) => {
    const { record, node } = await loadVolume(deps, kind, {
      uuid: request.params.uuid,
      who: request.identity,
      rule: "baremetal:volume:delete",
    });
    if (!node) throw new NodeNotFound(record.node_uuid);
    await changeVolume(deps.provisioner, node, {
      action: `${action} deletion`,
      deleting: true,
      write: () => kind.remove(deps, record.uuid),
    });
    await reply.code(204).send();
  });
}

/** The volume root of Ironic 1.32: links to the connectors and targets, globally or of one node. */
function volumeRoot(request: FastifyRequest, prefix: string): Record<string, unknown> {
  const base = baseUrl(request);
  return {
    links: resourceLinks(base, `${prefix}volume/`),
    connectors: resourceLinks(base, `${prefix}volume/connectors`),
    targets: resourceLinks(base, `${prefix}volume/targets`),
  };
}

/**
 * Volume connectors and targets (Ironic 1.32): stored and shown with Ironic's rules, scoped through their
 * node. Anvil's only storage interface is `noop`, so nothing attaches them: a deploy that would have to boot
 * from a volume is refused when it is asked for.
 */
export function volumePlugin(deps: ApiDeps) {
  return async (app: FastifyInstance): Promise<void> => {
    app.addHook("onRequest", async (request) => {
      const path = request.url.split("?")[0] ?? "";
      const isVolume = path.startsWith("/v1/volume") || /^\/v1\/nodes\/[^/]+\/volume(\/|$)/.test(path);
      if (isVolume && request.apiMinor < VOLUME_VERSION) throw notFound("Resource could not be found.");
    });
    app.get("/v1/volume", async (request) => {
      authorize("baremetal:volume:get", request.identity);
      return volumeRoot(request, "");
    });
    app.get<{ Params: { ident: string } }>("/v1/nodes/:ident/volume", async (request) => {
      const node = await checkNodePolicies((id) => deps.store.getNode(id), request.identity, {
        ident: request.params.ident,
        rules: ["baremetal:node:get"],
      });
      authorize("baremetal:volume:get", request.identity, { owner: node.owner, lessee: node.lessee });
      return volumeRoot(request, `nodes/${request.params.ident}/`);
    });
    volumeRoutes(app, deps, CONNECTORS);
    volumeRoutes(app, deps, TARGETS);
  };
}
