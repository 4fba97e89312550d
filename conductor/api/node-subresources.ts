import type { FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import { MaintenanceBody, Trait, TraitsBody } from "../../shared/api.ts";
import { listScope } from "../auth/node-access.ts";
import { PolicyForbidden, type PolicyName } from "../auth/policy.ts";
import { setMaintenance, setTraits } from "../operations/update-node.ts";
import { type ApiDeps, baseUrl, viewContext } from "./context.ts";
import { badRequest, notFound } from "./errors.ts";
import { CHILD_NODES_MINOR } from "./node-list.ts";
import { type IdentParams, nodeFor } from "./node-request.ts";
import { FieldsQuery, PageQuery, parseQuery } from "./query.ts";
import { checkPortFields } from "./ports.ts";
import { portView } from "./views.ts";

type Request = FastifyRequest<IdentParams>;
type TraitRequest = FastifyRequest<{ Params: { ident: string; trait: string } }>;

/** GET /v1/nodes/{id}/traits */
export async function listTraits(deps: ApiDeps, request: Request): Promise<{ traits: string[] }> {
  const node = await nodeFor(deps, request, "baremetal:node:traits:list");
  return { traits: node.traits };
}

async function changeTraits(
  deps: ApiDeps,
  request: Request,
  change: { rule: PolicyName; traits: (traits: string[]) => string[] },
): Promise<void> {
  const node = await nodeFor(deps, request, change.rule);
  await setTraits(deps.provisioner, node, change.traits);
}

/** PUT /v1/nodes/{id}/traits */
export async function replaceTraits(deps: ApiDeps, request: Request, reply: FastifyReply): Promise<void> {
  const body = TraitsBody.parse(request.body);
  await changeTraits(deps, request, {
    rule: "baremetal:node:traits:set",
    traits: () => [...new Set(body.traits)],
  });
  await reply.code(204).send();
}

/** PUT /v1/nodes/{id}/traits/{trait} */
export async function addTrait(deps: ApiDeps, request: TraitRequest, reply: FastifyReply): Promise<void> {
  const trait = Trait.parse(request.params.trait);
  await changeTraits(deps, request, {
    rule: "baremetal:node:traits:set",
    traits: (traits) => (traits.includes(trait) ? traits : [...traits, trait]),
  });
  await reply.code(204).send();
}

/** DELETE /v1/nodes/{id}/traits */
export async function removeTraits(deps: ApiDeps, request: Request, reply: FastifyReply): Promise<void> {
  await changeTraits(deps, request, { rule: "baremetal:node:traits:delete", traits: () => [] });
  await reply.code(204).send();
}

/** DELETE /v1/nodes/{id}/traits/{trait} */
export async function removeTrait(deps: ApiDeps, request: TraitRequest, reply: FastifyReply): Promise<void> {
  const node = await nodeFor(deps, request, "baremetal:node:traits:delete");
  const { trait } = request.params;
  if (!node.traits.includes(trait)) throw notFound(`Node ${node.uuid} doesn't have a trait ${trait}`);
  await changeTraits(deps, request, {
    rule: "baremetal:node:traits:delete",
    traits: (traits) => traits.filter((t) => t !== trait),
  });
  await reply.code(204).send();
}

/** PUT /v1/nodes/{id}/maintenance */
export async function maintenanceOn(deps: ApiDeps, request: Request, reply: FastifyReply): Promise<void> {
  const body = MaintenanceBody.parse(request.body ?? null);
  const node = await nodeFor(deps, request, "baremetal:node:set_maintenance");
  await setMaintenance(deps.provisioner, node, { on: true, reason: body?.reason ?? null });
  await reply.code(202).send();
}

/** DELETE /v1/nodes/{id}/maintenance */
export async function maintenanceOff(deps: ApiDeps, request: Request, reply: FastifyReply): Promise<void> {
  const node = await nodeFor(deps, request, "baremetal:node:clear_maintenance");
  await setMaintenance(deps.provisioner, node, { on: false, reason: null });
  await reply.code(202).send();
}

/** GET /v1/nodes/{id}/inventory */
export async function getInventory(deps: ApiDeps, request: Request): Promise<unknown> {
  const node = await nodeFor(deps, request, "baremetal:node:inventory:get");
  const inventory = await deps.store.getInventory(node.uuid);
  if (inventory === null) throw notFound(`Inventory for node ${node.uuid} could not be found.`);
  return inventory;
}

/** GET /v1/nodes/{id}/ports (`detail` false) and /v1/nodes/{id}/ports/detail */
export function nodePorts(deps: ApiDeps, detail: boolean) {
  return async (request: Request): Promise<unknown> => {
    const { fields, description_contains } = parseQuery(
      z
        .object({ fields: FieldsQuery.shape.fields, description_contains: z.string().max(4096).optional() })
        .loose(),
      request.query,
    );
    checkPortFields(fields, request.apiMinor);
    const node = await nodeFor(deps, request, "baremetal:port:get");
    const ports = await deps.store.listPorts({ node_uuid: node.uuid, description_contains }, {});
    const ctx = viewContext(request, deps);
    return { ports: ports.map((p) => portView(p, ctx, { fields, detail })) };
  };
}

/**
 * GET /v1/nodes/{id}/children (1.83): the uuids of the node's children the caller may see, and a link to
 * the list filtered by parent. A parent the caller may not read is the same 404 as a missing one.
 */
export async function listChildren(
  deps: ApiDeps,
  request: Request,
): Promise<{ children: string[]; links: { href: string; rel: string } }> {
  if (request.apiMinor < CHILD_NODES_MINOR) throw notFound("Resource could not be found.");
  let parent;
  try {
    parent = await nodeFor(deps, request, "baremetal:node:get");
  } catch (error) {
    if (error instanceof PolicyForbidden) throw notFound("Resource could not be found.");
    throw error;
  }
  const scope = listScope("node", request.identity);
  const children = await deps.store.listNodeSummaries({ ...scope, parent_node: parent.uuid }, {}, ["uuid"]);
  return {
    children: children.map((child) => child.uuid),
    links: { href: `${baseUrl(request)}/v1/nodes?parent_node=${parent.uuid}`, rel: "children" },
  };
}

/** Ironic's MINOR_86_FIRMWARE_INTERFACE. */
export const FIRMWARE_MINOR = 86;

/** Ironic's MINOR_114_FIRMWARE_IDENTITY: components show vendor, model and serial_number. */
export const FIRMWARE_IDENTITY_MINOR = 114;
const IDENTITY_FIELDS = ["model", "serial_number", "vendor"];

/**
 * GET /v1/nodes/{id}/firmware (1.86): the node's firmware components. Every Anvil node has the
 * `no-firmware` interface, which records none, so the list is empty, as Ironic's is for such a node. Asking
 * for 1.114's identity fields below 1.114 is Ironic's 400.
 */
export async function listFirmware(deps: ApiDeps, request: Request): Promise<{ firmware: unknown[] }> {
  if (request.apiMinor < FIRMWARE_MINOR) throw notFound("The resource could not be found.");
  const { fields } = parseQuery(PageQuery.pick({ fields: true, detail: true }).strict(), request.query);
  const early = IDENTITY_FIELDS.filter((field) => fields?.includes(field));
  if (early.length && request.apiMinor < FIRMWARE_IDENTITY_MINOR)
    throw badRequest(
      `Fields ${early.join(", ")} are not allowed in this API version. They require at least API version 1.${FIRMWARE_IDENTITY_MINOR}.`,
    );
  await nodeFor(deps, request, "baremetal:node:firmware:get");
  return { firmware: [] };
}
