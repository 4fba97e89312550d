import { randomUUID } from "node:crypto";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { JsonPatch, PortgroupCreateBody } from "../../shared/api.ts";
import {
  type NodeRecord,
  PORTGROUP_LATER_FIELDS,
  PortgroupRecord,
  withLaterFields,
} from "../../shared/resources.ts";
import { requireStrictBool } from "../../shared/strict-bool.ts";
import { isUuid } from "../../shared/uuid.ts";
import type { Identity } from "../auth/identity.ts";
import {
  authorizeNodeLink,
  canSeeNode,
  checkNodePolicies,
  checkNodeRule,
  listScope,
  visibleNode,
} from "../auth/node-access.ts";
import { authorize, type PolicyName } from "../auth/policy.ts";
import { normalizeMac } from "../drivers/boot/mac.ts";
import { NotAcceptable } from "../errors.ts";
import { type ApiDeps, baseUrl, viewContext } from "./context.ts";
import { nodeWhenFree } from "../operations/operation.ts";
import { badRequest, notFound } from "./errors.ts";
import { applyJsonPatch, type PatchRules } from "./json-patch.ts";
import { PORTGROUP_JSON_FIELDS, checkStoredJson } from "./limits.ts";
import {
  FieldsQuery,
  PortListQuery,
  PortgroupListQuery,
  collection,
  effectiveLimit,
  parseQuery,
} from "./query.ts";
import { renderJson } from "./render.ts";
import { checkPortFields } from "./ports.ts";
import { PORTGROUP_VIEW_FIELDS, portView, portgroupView } from "./views.ts";

/** Port groups appeared in 1.23; their ports sub-collection in 1.24; mode and properties in 1.26. */
export const PORTGROUPS_MINOR = 23;
const SUBCOLLECTIONS_MINOR = 24;
const MODE_MINOR = 26;
/** Ironic's MINOR_106_PORTGROUP_SHARD: the port group list filtered by its nodes' shards. */
const PORTGROUP_SHARD_MINOR = 106;
/** Ironic's [DEFAULT]default_portgroup_mode. */
const DEFAULT_MODE = "active-backup";

const PATCH_RULES: PatchRules = {
  writable: new Set([
    "address",
    "extra",
    "mode",
    "name",
    "node_uuid",
    "properties",
    "standalone_ports_supported",
    "physical_network",
    "category",
  ]),
  objectFields: new Set(["extra", "properties"]),
};

/** Ironic's is_valid_logical_name: hostname-safe characters, at most 255, not a uuid. */
function validName(name: string): boolean {
  return /^[A-Za-z0-9\-._~]{1,255}$/.test(name) && !isUuid(name);
}

function requireVersion(request: FastifyRequest, minor = PORTGROUPS_MINOR): void {
  if (request.apiMinor < minor) throw notFound("The resource could not be found.");
}

/** Ironic's MINOR_111_DYNAMIC_PORTGROUP: port groups show dynamic_portgroup. */
const DYNAMIC_PORTGROUP_MINOR = 111;

/** Unknown fields are a 400; dynamic_portgroup below 1.111 a 406 (Ironic's check_allowed_portgroup_fields). */
function checkFields(fields: readonly string[] | undefined, minor: number): void {
  const unknown = (fields ?? []).filter((f) => !PORTGROUP_VIEW_FIELDS.has(f));
  if (unknown.length) throw badRequest(`Field(s) "${unknown.join(", ")}" are not valid`);
  if (fields?.includes("dynamic_portgroup") && minor < DYNAMIC_PORTGROUP_MINOR)
    throw new NotAcceptable("Request not acceptable.");
}

/** Ironic's check_port_policy_and_retrieve(portgroup=True). @throws NotFound, PolicyForbidden */
async function loadPortgroup(
  deps: ApiDeps,
  ident: string,
  access: { who: Identity; rule: PolicyName },
): Promise<{ portgroup: PortgroupRecord; node: NodeRecord | null }> {
  const portgroup = await deps.store.getPortgroup(ident);
  if (!portgroup) {
    authorize(access.rule, access.who);
    throw notFound(`Portgroup ${ident} could not be found.`);
  }
  const node = await deps.store.getNode(portgroup.node_uuid);
  if (!canSeeNode(access.who, node ?? { owner: null, lessee: null }))
    throw notFound(`Portgroup ${ident} could not be found.`);
  checkNodeRule(access.rule, access.who, node ?? { owner: null, lessee: null });
  return { portgroup, node };
}

/** A port group changes only while its node is not being worked on (Ironic takes the node's lock). */
async function checkNodeFree(deps: ApiDeps, node: NodeRecord | null): Promise<void> {
  if (node !== null) await nodeWhenFree(deps.provisioner, node.uuid);
}

const mac = (address: string | null | undefined): string | null =>
  address === null || address === undefined ? null : normalizeMac(address);

/** Sets the group's physical network on each of its ports that differs. */
async function carryPhysicalNetwork(deps: ApiDeps, portgroup: PortgroupRecord): Promise<void> {
  for (let marker: string | undefined; ;) {
    const ports = await deps.store.listPorts({ portgroup_uuid: portgroup.uuid }, { limit: 500, marker });
    for (const port of ports)
      if (port.physical_network !== portgroup.physical_network)
        await deps.store.updatePort(port.uuid, { physical_network: portgroup.physical_network });
    if (ports.length < 500) return;
    marker = ports[ports.length - 1]?.uuid;
  }
}

/** Port groups: bonds of a node's ports (Ironic's /v1/portgroups, /v1/nodes/{id}/portgroups). */
export function portgroupsPlugin(deps: ApiDeps) {
  return async (app: FastifyInstance): Promise<void> => {
    async function list(
      request: FastifyRequest,
      reply: FastifyReply,
      options: { detail: boolean; node?: NodeRecord; url: string },
    ): Promise<void> {
      const query = parseQuery(PortgroupListQuery, request.query);
      if (options.detail && query.fields !== undefined)
        throw badRequest("Can not specify ?detail=True and fields in the same request.");
      checkFields(query.fields, request.apiMinor);
      const scope = listScope("portgroup", request.identity);
      let nodeUuid = options.node?.uuid;
      if (query.node !== undefined) nodeUuid = (await visibleNode(deps, request.identity, query.node)).uuid;
      if (query.shard !== undefined && request.apiMinor < PORTGROUP_SHARD_MINOR)
        throw new NotAcceptable(
          `Request not acceptable. The minimal required API version should be 1.${PORTGROUP_SHARD_MINOR}`,
        );
      const exclusive = [nodeUuid, query.address, query.shard, query.conductor_groups];
      if (exclusive.filter((value) => value?.length).length > 1)
        throw badRequest("Filtering by node, address, or shard simultaneously is not supported.");
      const limit = effectiveLimit(query.limit);
      const portgroups = await deps.store.listPortgroups(
        {
          ...scope,
          node_uuid: nodeUuid,
          address: mac(query.address) ?? undefined,
          shard: query.shard,
          conductor_groups: query.conductor_groups,
        },
        { limit, marker: query.marker, sortKey: query.sort_key, sortDir: query.sort_dir },
      );
      const ctx = viewContext(request, deps);
      const detail = options.detail || query.detail === true;
      const body = collection({
        key: "portgroups",
        items: portgroups,
        views: portgroups.map((pg) => portgroupView(pg, ctx, { fields: query.fields, detail })),
        limit,
        url: `${baseUrl(request)}/v1/${options.url}`,
        query: request.query as Record<string, unknown>,
      });
      await reply.type("application/json; charset=utf-8").send(renderJson(body, "portgroups"));
    }

    type Ident = { Params: { ident: string } };
    for (const detail of [false, true]) {
      const suffix = detail ? "/detail" : "";
      app.get(`/v1/portgroups${suffix}`, async (request, reply) => {
        requireVersion(request);
        await list(request, reply, { detail, url: `portgroups${suffix}` });
      });
      app.get<Ident>(`/v1/nodes/:ident/portgroups${suffix}`, async (request, reply) => {
        requireVersion(request);
        const node = await checkNodePolicies((ident) => deps.store.getNode(ident), request.identity, {
          ident: request.params.ident,
          rules: ["baremetal:portgroup:get"],
        });
        await list(request, reply, { detail, node, url: `portgroups${suffix}` });
      });
      app.get<Ident>(`/v1/portgroups/:ident/ports${suffix}`, async (request) => {
        requireVersion(request, SUBCOLLECTIONS_MINOR);
        const query = parseQuery(
          PortListQuery.pick({ fields: true, limit: true, marker: true }),
          request.query,
        );
        checkPortFields(query.fields, request.apiMinor);
        const { portgroup } = await loadPortgroup(deps, request.params.ident, {
          who: request.identity,
          rule: "baremetal:port:get",
        });
        const ports = await deps.store.listPorts(
          { portgroup_uuid: portgroup.uuid },
          { limit: effectiveLimit(query.limit), marker: query.marker },
        );
        const ctx = viewContext(request, deps);
        return { ports: ports.map((p) => portView(p, ctx, { fields: query.fields, detail })) };
      });
    }

    app.get<Ident>("/v1/portgroups/:ident", async (request) => {
      requireVersion(request);
      const { fields } = parseQuery(FieldsQuery, request.query);
      checkFields(fields, request.apiMinor);
      const { portgroup } = await loadPortgroup(deps, request.params.ident, {
        who: request.identity,
        rule: "baremetal:portgroup:get",
      });
      return portgroupView(portgroup, viewContext(request, deps), { fields, detail: true });
    });

    app.post("/v1/portgroups", async (request, reply) => {
      requireVersion(request);
      const body = PortgroupCreateBody.parse(request.body);
      const node = await deps.store.getNode(body.node_uuid);
      // policy first, then the missing node (Ironic delays NodeNotFound so it tells nothing to the refused)
      if (node) checkNodeRule("baremetal:portgroup:create", request.identity, node);
      else authorize("baremetal:portgroup:create", request.identity);
      if (!node) throw badRequest(`Node ${body.node_uuid} could not be found.`);
      if (request.apiMinor < MODE_MINOR && (body.mode || body.properties))
        throw new NotAcceptable("Request not acceptable.");
      if (body.name && !validName(body.name))
        throw badRequest(`Cannot create portgroup with invalid name '${body.name}'`);
      checkStoredJson(body, PORTGROUP_JSON_FIELDS, deps.config.api);
      await checkNodeFree(deps, node);
      const portgroup = await deps.store.createPortgroup({
        uuid: body.uuid ?? randomUUID(),
        name: body.name ?? null,
        address: mac(body.address),
        node_uuid: node.uuid,
        standalone_ports_supported: body.standalone_ports_supported ?? true,
        internal_info: {},
        extra: body.extra ?? {},
        mode: body.mode || DEFAULT_MODE,
        properties: body.properties ?? {},
        physical_network: body.physical_network ?? null,
        category: body.category ?? null,
        dynamic_portgroup: false,
        created_at: new Date().toISOString(),
        updated_at: null,
      });
      await reply
        .code(201)
        .header("Location", `${baseUrl(request)}/v1/portgroups/${portgroup.uuid}`)
        .send(portgroupView(portgroup, viewContext(request, deps), { detail: true }));
    });

    app.patch<Ident>("/v1/portgroups/:ident", async (request) => {
      requireVersion(request);
      const patch = JsonPatch.parse(request.body);
      const { portgroup, node } = await loadPortgroup(deps, request.params.ident, {
        who: request.identity,
        rule: "baremetal:portgroup:update",
      });
      if (
        request.apiMinor < MODE_MINOR &&
        patch.some((op) => ["/mode", "/properties"].some((p) => op.path === p || op.path.startsWith(`${p}/`)))
      )
        throw new NotAcceptable("Request not acceptable.");
      const { doc, touched } = applyJsonPatch(
        withLaterFields(portgroup, PORTGROUP_LATER_FIELDS),
        patch,
        PATCH_RULES,
      );
      for (const key of ["extra", "properties"]) if (doc[key] === null) doc[key] = {};
      if (touched.has("standalone_ports_supported"))
        doc.standalone_ports_supported =
          doc.standalone_ports_supported === null
            ? true
            : requireStrictBool("standalone_ports_supported", doc.standalone_ports_supported);
      if (touched.has("mode") && doc.mode === null) doc.mode = DEFAULT_MODE;
      const checked = PortgroupRecord.parse(doc);
      if (checked.name && !validName(checked.name))
        throw badRequest(
          `Portgroup ${request.params.ident}: Cannot change name to invalid name '${checked.name}'`,
        );
      checkStoredJson(
        checked,
        PORTGROUP_JSON_FIELDS.filter((field) => touched.has(field)),
        deps.config.api,
      );
      checked.address = mac(checked.address);
      await checkNodeFree(deps, node);
      if (checked.node_uuid !== portgroup.node_uuid) {
        // policy holds on every node the request touches: the new node as well as the old one
        const target = await authorizeNodeLink(
          deps,
          { who: request.identity, rule: "baremetal:portgroup:update" },
          { from: node ?? { owner: null, lessee: null }, to: checked.node_uuid },
        );
        await checkNodeFree(deps, target);
        checked.node_uuid = target.uuid;
        const members = await deps.store.listPorts({ portgroup_uuid: portgroup.uuid }, { limit: 1 });
        if (members.length)
          throw badRequest(
            `Cannot complete the requested action because portgroup ${portgroup.uuid} contains ports.`,
          );
      }
      const { uuid: _uuid, ...changes } = checked;
      const updated = await deps.store.updatePortgroup(portgroup.uuid, changes);
      // Ironic's update_portgroup_physical_network: the group's ports follow its physical network
      if (touched.has("physical_network")) await carryPhysicalNetwork(deps, updated);
      return portgroupView(updated, viewContext(request, deps), { detail: true });
    });

    app.delete<Ident>("/v1/portgroups/:ident", async (request, reply) => {
      requireVersion(request);
      const { portgroup, node } = await loadPortgroup(deps, request.params.ident, {
        who: request.identity,
        rule: "baremetal:portgroup:delete",
      });
      await checkNodeFree(deps, node);
      const members = await deps.store.listPorts({ portgroup_uuid: portgroup.uuid }, { limit: 1 });
      if (members.length)
        throw badRequest(
          `Cannot complete the requested action because portgroup ${portgroup.uuid} contains ports.`,
        );
      await deps.store.deletePortgroup(portgroup.uuid);
      await reply.code(204).send();
    });
  };
}
