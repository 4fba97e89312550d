import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { z } from "zod";
import { JsonPatch, PortCreateBody } from "../../shared/api.ts";
import {
  type NodeRecord,
  PORT_LATER_FIELDS,
  PortRecord,
  newPortRecord,
  withLaterFields,
} from "../../shared/resources.ts";
import { pyRepr } from "../../shared/py-format.ts";
import { requireStrictBool } from "../../shared/strict-bool.ts";
import { normalizeMac } from "../drivers/boot/mac.ts";
import { type ApiDeps, baseUrl, viewContext } from "./context.ts";
import { nodeWhenFree } from "../operations/operation.ts";
import { badRequest, notFound } from "./errors.ts";
import { applyJsonPatch, type PatchRules } from "./json-patch.ts";
import { PORT_JSON_FIELDS, checkStoredJson } from "./limits.ts";
import { FieldsQuery, PortListQuery, collection, effectiveLimit, parseQuery } from "./query.ts";
import { renderJson } from "./render.ts";
import { portFieldVisible, portView } from "./views.ts";
import { Forbidden, NotAcceptable } from "../errors.ts";
import { SHARD_MINOR } from "./shards.ts";
import type { Identity } from "../auth/identity.ts";
import { authorizeNodeLink, canSeeNode, checkNodeRule, listScope, visibleNode } from "../auth/node-access.ts";
import { authorize, type PolicyName } from "../auth/policy.ts";

const WRITABLE = new Set([
  "address",
  "node_uuid",
  "pxe_enabled",
  "physical_network",
  "local_link_connection",
  "extra",
  "is_smartnic",
  "name",
  "portgroup_uuid",
  "description",
  "vendor",
  "category",
  "available_for_dynamic_portgroup",
]);

const PATCH_RULES: PatchRules = {
  writable: WRITABLE,
  objectFields: new Set(["local_link_connection", "extra"]),
};

/** Ironic's MINOR_88_PORT_NAME. */
export const PORT_NAME_MINOR = 88;

/**
 * Ironic's _check_allowed_port_fields: naming a port field newer than the request (in `fields`, or a create
 * body's key, even null) is a bare 406. @throws NotAcceptable
 */
export function checkPortFields(fields: Iterable<string> | undefined, minor: number): void {
  for (const field of fields ?? []) {
    // Ironic hides internal_info below 1.18 but does not refuse asking for it
    if (field !== "internal_info" && !portFieldVisible(field, minor))
      throw new NotAcceptable("Request not acceptable.");
  }
}

/** Ironic's microversion giving port groups a physical network (MINOR_102_PORTGROUP_PHYSICAL_NETWORK). */
export const PORTGROUP_PHYSNET_MINOR = 102;

/** An empty physical network is refused (null clears it). @throws ApiError(400) */
function checkPhysicalNetwork(value: string | null | undefined): void {
  if (value === "") throw badRequest("A non-empty value is required when setting physical_network");
}

/**
 * Ironic's rules for combining the port list's filters: one of node, port group and shard (a bare 403, its
 * OperationNotPermitted); conductor groups with none of node, port group and address; shard from 1.82.
 * @throws Forbidden, ApiError(400), NotAcceptable
 */
function checkPortListFilters(query: z.infer<typeof PortListQuery>, minor: number): void {
  if (query.shard !== undefined && minor < SHARD_MINOR)
    throw new NotAcceptable(
      `Request not acceptable. The minimal required API version should be 1.${SHARD_MINOR}`,
    );
  const node = query.node ?? query.node_uuid;
  if ([node, query.portgroup, query.shard].filter((value) => value?.length).length > 1)
    throw new Forbidden("Operation not permitted.");
  if (query.conductor_groups?.length && (node || query.portgroup || query.address))
    throw badRequest(
      "Filtering by conductor_groups cannot be combined with node_ident, portgroup_ident, or node address filters.",
    );
}

/**
 * OVN VTEP switch keys in a new port's local_link_connection exist from 1.90 until 1.105 removed them
 * (Ironic's allow_ovn_vtep_version, checked on create only). @throws NotAcceptable
 */
function checkVtep(connection: Record<string, unknown> | undefined, minor: number): void {
  if (connection && "vtep-logical-switch" in connection && (minor < 90 || minor >= 105))
    throw new NotAcceptable("Request not acceptable.");
}

/**
 * A patched available_for_dynamic_portgroup: a JSON boolean as Ironic's schema (`{'type': 'boolean'}`),
 * removal (null) its default, true. @throws ApiError(400)
 */
function dynamicPortgroupFlag(value: unknown): boolean {
  if (value === null || value === undefined) return true;
  if (typeof value !== "boolean")
    throw badRequest(`Schema error for patch: ${pyRepr(value)} is not of type 'boolean'`);
  return value;
}

/** @throws InvalidMacAddress (a 400) */
const mac = (address: string): string => normalizeMac(address);

/**
 * The port, if the caller passes `rule` on its node (Ironic's check_port_policy_and_retrieve): a missing
 * port is 404 for system users and 403 for project users, a port on a node they cannot see is 404.
 */
async function loadPortAndNode(
  deps: ApiDeps,
  uuid: string,
  access: { who: Identity; rule: PolicyName },
): Promise<{ port: PortRecord; node: Pick<NodeRecord, "owner" | "lessee"> }> {
  const port = await deps.store.getPort(uuid);
  if (!port) {
    authorize(access.rule, access.who);
    throw notFound(`Port ${uuid} could not be found.`);
  }
  const node = (await deps.store.getNode(port.node_uuid)) ?? { owner: null, lessee: null };
  if (!canSeeNode(access.who, node)) throw notFound(`Port ${uuid} could not be found.`);
  checkNodeRule(access.rule, access.who, node);
  return { port, node };
}

async function loadPort(
  deps: ApiDeps,
  uuid: string,
  access: { who: Identity; rule: PolicyName },
): Promise<PortRecord> {
  return (await loadPortAndNode(deps, uuid, access)).port;
}

/** A port may change only while its node is not being worked on. */
/**
 * The node a new port goes on: `node_uuid`, or from 1.94 `node_ident` (uuid or name), exactly one of them as
 * Ironic's PORT_SCHEMA oneOf says; the node record, or the ident asked for when there is none (the caller's
 * NodeNotFound names it). @throws Invalid (neither or both), NotAcceptable (node_ident below 1.94)
 */
async function portNodeOf(
  deps: ApiDeps,
  body: PortCreateBody,
  request: { body: unknown; apiMinor: number },
): Promise<NodeRecord | string> {
  const ident = body.node_ident ?? body.node_uuid;
  if (ident === undefined || (body.node_ident !== undefined && body.node_uuid !== undefined)) {
    const why =
      ident === undefined
        ? "is not valid under any of the given schemas"
        : "is valid under each of {'required': ['node_ident']}, {'required': ['node_uuid']}";
    // jsonschema echoes the whole body; a long one is cut, as pyRepr cuts long values elsewhere
    throw badRequest(`Schema error for port: ${pyRepr(request.body).slice(0, 1000)} ${why}`);
  }
  if (body.node_ident !== undefined && request.apiMinor < 94)
    throw new NotAcceptable("Request not acceptable.");
  return (await deps.store.getNode(ident)) ?? ident;
}

async function checkNodeFree(deps: ApiDeps, nodeUuid: string): Promise<void> {
  const node = await nodeWhenFree(deps.provisioner, nodeUuid);
  if (!node) throw badRequest(`Node ${nodeUuid} could not be found.`);
}

/**
 * A port's port group must exist and be on the port's node (Ironic's texts; a missing group is a 400, as a
 * field naming nothing). @throws Invalid
 */
async function checkPortgroup(deps: ApiDeps, portgroupUuid: string | null | undefined, nodeUuid: string) {
  if (!portgroupUuid) return;
  const portgroup = await deps.store.getPortgroup(portgroupUuid);
  if (!portgroup) throw badRequest(`Portgroup ${portgroupUuid} could not be found.`);
  if (portgroup.node_uuid !== nodeUuid)
    throw badRequest("Port can not be added to a portgroup belonging to a different node.");
}

/** Ports: the node's NICs (MAC addresses), used for PXE and agent lookup. */
export function portsPlugin(deps: ApiDeps) {
  return async (app: FastifyInstance): Promise<void> => {
    async function list(request: FastifyRequest, reply: FastifyReply, detail: boolean): Promise<void> {
      const query = parseQuery(PortListQuery, request.query);
      checkPortFields(query.fields, request.apiMinor);
      checkPortListFilters(query, request.apiMinor);
      const scope = listScope("port", request.identity);
      let nodeUuid = query.node_uuid;
      if (query.node !== undefined) nodeUuid = (await visibleNode(deps, request.identity, query.node)).uuid;
      let portgroupUuid: string | undefined;
      if (query.portgroup !== undefined) {
        const portgroup = await deps.store.getPortgroup(query.portgroup);
        if (!portgroup) throw notFound(`Portgroup ${query.portgroup} could not be found.`);
        portgroupUuid = portgroup.uuid;
      }
      const limit = effectiveLimit(query.limit);
      const ports = await deps.store.listPorts(
        {
          ...scope,
          node_uuid: nodeUuid,
          address: query.address === undefined ? undefined : mac(query.address),
          portgroup_uuid: portgroupUuid,
          shard: query.shard,
          conductor_groups: query.conductor_groups,
          description_contains: query.description_contains,
        },
        { limit, marker: query.marker, sortKey: query.sort_key, sortDir: query.sort_dir },
      );
      const ctx = viewContext(request, deps);
      const body = collection({
        key: "ports",
        items: ports,
        views: ports.map((p) =>
          portView(p, ctx, { fields: query.fields, detail: detail || query.detail === true }),
        ),
        limit,
        url: `${baseUrl(request)}/v1/${detail ? "ports/detail" : "ports"}`,
        query: request.query as Record<string, unknown>,
      });
      await reply.type("application/json; charset=utf-8").send(renderJson(body, "ports"));
    }

    app.get("/v1/ports", (request, reply) => list(request, reply, false));
    app.get("/v1/ports/detail", (request, reply) => list(request, reply, true));

    app.post("/v1/ports", async (request, reply) => {
      const body = PortCreateBody.parse(request.body);
      const { node_ident: _ident, ...fields } = body;
      checkPortFields(Object.keys(fields), request.apiMinor);
      checkVtep(body.local_link_connection, request.apiMinor);
      checkStoredJson(body, PORT_JSON_FIELDS, deps.config.api);
      const address = mac(body.address);
      checkPhysicalNetwork(body.physical_network);
      const target = await portNodeOf(deps, body, request);
      if (typeof target !== "string") checkNodeRule("baremetal:port:create", request.identity, target);
      else authorize("baremetal:port:create", request.identity);
      const nodeUuid = typeof target === "string" ? target : target.uuid;
      await checkNodeFree(deps, nodeUuid);
      await checkPortgroup(deps, body.portgroup_uuid, nodeUuid);
      const port = await deps.store.createPort(
        newPortRecord({
          uuid: body.uuid,
          address,
          node_uuid: nodeUuid,
          portgroup_uuid: body.portgroup_uuid,
          pxe_enabled: body.pxe_enabled,
          physical_network: body.physical_network,
          local_link_connection: body.local_link_connection,
          extra: body.extra,
          is_smartnic: body.is_smartnic,
          name: body.name,
          description: body.description,
          vendor: body.vendor,
          category: body.category,
          available_for_dynamic_portgroup: body.available_for_dynamic_portgroup,
        }),
      );
      await reply
        .code(201)
        .header("Location", `${baseUrl(request)}/v1/ports/${port.uuid}`)
        .send(portView(port, viewContext(request, deps), { detail: true }));
    });

    app.get<{ Params: { uuid: string } }>("/v1/ports/:uuid", async (request) => {
      const { fields } = parseQuery(FieldsQuery, request.query);
      checkPortFields(fields, request.apiMinor);
      const port = await loadPort(deps, request.params.uuid, {
        who: request.identity,
        rule: "baremetal:port:get",
      });
      return portView(port, viewContext(request, deps), { fields, detail: true });
    });

    app.patch<{ Params: { uuid: string } }>("/v1/ports/:uuid", async (request) => {
      const patch = JsonPatch.parse(request.body);
      const { port, node } = await loadPortAndNode(deps, request.params.uuid, {
        who: request.identity,
        rule: "baremetal:port:update",
      });
      const { doc: patched, touched } = applyJsonPatch(
        withLaterFields(port, PORT_LATER_FIELDS),
        patch,
        PATCH_RULES,
      );
      for (const key of ["local_link_connection", "extra"]) if (patched[key] === null) patched[key] = {};
      // a removed flag goes back to its default (pxe_enabled true, is_smartnic false)
      for (const [key, unset] of [
        ["pxe_enabled", true],
        ["is_smartnic", false],
      ] as const)
        if (touched.has(key))
          patched[key] = patched[key] === null ? unset : requireStrictBool(key, patched[key]);
      // 1.111: Ironic's schema takes a JSON boolean only; removing it restores its default
      if (touched.has("available_for_dynamic_portgroup"))
        patched.available_for_dynamic_portgroup = dynamicPortgroupFlag(
          patched.available_for_dynamic_portgroup,
        );
      const checked = PortRecord.parse(patched);
      if (touched.has("physical_network")) {
        checkPhysicalNetwork(checked.physical_network);
        // 1.102: a port in a group takes the group's physical network (set on the group, carried to its ports)
        if (request.apiMinor >= PORTGROUP_PHYSNET_MINOR && checked.portgroup_uuid)
          throw badRequest("physical_network cannot be changed while the port belongs to a portgroup.");
      }
      checkStoredJson(
        checked,
        PORT_JSON_FIELDS.filter((field) => touched.has(field)),
        deps.config.api,
      );
      checked.address = mac(checked.address);
      if (checked.node_uuid !== port.node_uuid) {
        // policy holds on every node the request touches: the port's new node as well as its old one
        await authorizeNodeLink(
          deps,
          { who: request.identity, rule: "baremetal:port:update" },
          {
            from: node,
            to: checked.node_uuid,
          },
        );
      }
      await checkNodeFree(deps, port.node_uuid);
      if (checked.node_uuid !== port.node_uuid) await checkNodeFree(deps, checked.node_uuid);
      if (touched.has("portgroup_uuid") || touched.has("node_uuid"))
        await checkPortgroup(deps, checked.portgroup_uuid, checked.node_uuid);
      const updated = await deps.store.updatePort(port.uuid, checked);
      return portView(updated, viewContext(request, deps), { detail: true });
    });

    app.delete<{ Params: { uuid: string } }>("/v1/ports/:uuid", async (request, reply) => {
      const port = await loadPort(deps, request.params.uuid, {
        who: request.identity,
        rule: "baremetal:port:delete",
      });
      await checkNodeFree(deps, port.node_uuid);
      await deps.store.deletePort(port.uuid);
      await reply.code(204).send();
    });
  };
}
