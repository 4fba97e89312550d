import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { JsonPatch, NodeCreateBody } from "../../shared/api.ts";
import { checkNodeRule, patchRules, redactNodeView } from "../auth/node-access.ts";
import { PolicyForbidden, allowed, authorize } from "../auth/policy.ts";
import {
  GET_BOOT_DEVICE,
  INJECT_NMI,
  SET_BOOT_DEVICE,
  SUPPORTED_BOOT_DEVICES,
} from "../operations/boot-device.ts";
import { SET_BOOT_MODE, SET_SECURE_BOOT } from "../operations/boot-mode.ts";
import { DELETE_NODE, deleteNode } from "../operations/delete-node.ts";
import { checkName, newNode } from "../operations/node-record.ts";
import { hardwareOf } from "../operations/operation.ts";
import { CHANGE_POWER } from "../operations/power.ts";
import { PROVISION } from "../operations/provisioner.ts";
import { SET_MAINTENANCE, UPDATE_NODE, updateNode } from "../operations/update-node.ts";
import { VALIDATE } from "../operations/validate.ts";
import { SET_RAID_CONFIG } from "../operations/raid.ts";
import { NotAcceptable } from "../errors.ts";
import { type ApiDeps, baseUrl, viewContext } from "./context.ts";
import { badRequest } from "./errors.ts";
import { checkNodeChassis } from "./chassis.ts";
import { createdEntry, nodeHistory } from "./history.ts";
import { NODE_JSON_FIELDS, checkStoredJson } from "./limits.ts";
import * as actions from "./node-actions.ts";
import { listNodes } from "./node-list.ts";
import { PageBuffers } from "../page-buffers.ts";
import { patchNode } from "./node-patch.ts";
import { nodeAllocationRoutes } from "./node-allocation.ts";
import { nodeConsoleRoutes } from "./node-console.ts";
import { nodeVifRoutes } from "./node-vifs.ts";
import { nodeIndicatorRoutes } from "./node-indicators.ts";
import { nodeVmediaRoutes } from "./node-vmedia.ts";
import { nodeLogRoutes } from "./node-logs.ts";
import {
  type IdentParams,
  calls,
  checkFields,
  nodeFor,
  rejectNewerCreateFields,
  rejectNewerPatchFields,
  resolveParentNode,
} from "./node-request.ts";
import * as sub from "./node-subresources.ts";
import { FieldsQuery, NodePatchQuery, parseQuery } from "./query.ts";
import { renderJson } from "./render.ts";
import { nodeView } from "./views.ts";

type Request = FastifyRequest<IdentParams>;

/** Ironic's MINOR_45_RESET_INTERFACES. */
const RESET_INTERFACES_MINOR = 45;

/** POST /v1/nodes */
async function createNode(deps: ApiDeps, request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const body = NodeCreateBody.parse(request.body);
  if (!allowed("baremetal:node:create", request.identity)) {
    // a project admin may enroll nodes its project owns (Ironic's self_owned_node)
    authorize("baremetal:node:create:self_owned_node", request.identity);
    const project = request.identity.project;
    if (project === null || (body.owner && body.owner !== project))
      throw new PolicyForbidden("baremetal:node:create");
    body.owner = project;
  }
  rejectNewerCreateFields(body, request.apiMinor);
  checkStoredJson(body, NODE_JSON_FIELDS, deps.config.api);
  checkName(body.name);
  if (body.parent_node)
    body.parent_node = await resolveParentNode(deps, request, {
      from: { owner: body.owner ?? null, lessee: body.lessee ?? null },
      to: body.parent_node,
    });
  const hw = hardwareOf(deps.drivers, body.driver, body.conductor_group);
  await checkNodeChassis(deps, { ...body, previous: null, minor: request.apiMinor });
  // before 1.11 (no enroll state yet) a node starts available, as Ironic's initial_node_provision_state
  const initial = request.apiMinor < 11 ? "available" : "enroll";
  const record = newNode(body, hw, initial);
  const entry = deps.history && createdEntry(deps.history, request, record);
  const node = await deps.store.createNode(record, entry);
  if (entry) deps.history?.log(entry);
  deps.events.publish({ type: "created", node: node.uuid });
  await reply
    .code(201)
    .header("Location", `${baseUrl(request)}/v1/nodes/${node.uuid}`)
    .send(nodeView(node, viewContext(request, deps), { detail: true }));
}

/** GET /v1/nodes/{id} */
async function getNode(deps: ApiDeps, request: Request, reply: FastifyReply): Promise<void> {
  const { fields } = parseQuery(FieldsQuery, request.query);
  checkFields(fields);
  const node = await nodeFor(deps, request, "baremetal:node:get");
  const view = redactNodeView(
    nodeView(node, viewContext(request, deps), { fields, detail: true }),
    request.identity,
    node,
  );
  await reply.type("application/json; charset=utf-8").send(renderJson(view));
}

/** PATCH /v1/nodes/{id} */
async function patch(deps: ApiDeps, request: Request, reply: FastifyReply): Promise<void> {
  const body = JsonPatch.parse(request.body);
  rejectNewerPatchFields(body, request.apiMinor);
  const { reset_interfaces: reset } = parseQuery(NodePatchQuery, request.query);
  // Ironic's 1.45: the parameter is refused (406) before it, and only goes with a driver change (400)
  if (reset !== undefined && request.apiMinor < RESET_INTERFACES_MINOR)
    throw new NotAcceptable("Request not acceptable.");
  if (reset === true && !body.some((op) => op.path === "/driver" && op.op !== "remove"))
    throw badRequest("The reset_interfaces parameter can only be used when changing the node's driver.");
  const node = await nodeFor(deps, request, ...patchRules(body));
  // the chassis named must exist (and removing it needs 1.25): read before the lock, as Ironic's API does
  const preview = patchNode(node, body, deps.config.api);
  await checkNodeChassis(deps, { ...preview, previous: node.chassis_uuid, minor: request.apiMinor });
  // a parent named by uuid or name is stored as its uuid, checked before the lock as Ironic's API does
  const parent = preview.parent_node
    ? await resolveParentNode(deps, request, { from: node, to: preview.parent_node, self: node.uuid })
    : undefined;
  const { node: updated } = await updateNode(deps.provisioner, node, {
    changesOf: (current) => {
      const changes = patchNode(current, body, deps.config.api);
      if (parent !== undefined && changes.parent_node) changes.parent_node = parent;
      return changes;
    },
    resetInterfaces: reset === true,
  });
  const view = redactNodeView(
    nodeView(updated, viewContext(request, deps), { detail: true }),
    request.identity,
    updated,
  );
  await reply.type("application/json; charset=utf-8").send(renderJson(view));
}

/** DELETE /v1/nodes/{id} */
async function remove(deps: ApiDeps, request: Request, reply: FastifyReply): Promise<void> {
  const node = await nodeFor(deps, request, "baremetal:node:get");
  // Ironic: system admins delete any node, a project admin the nodes its project owns
  if (!allowed("baremetal:node:delete", request.identity))
    checkNodeRule("baremetal:node:delete:self_owned_node", request.identity, node);
  await deleteNode(deps.provisioner, node);
  await reply.code(204).send();
}

/**
 * Nodes: CRUD, states, power, raid, steps, validate, boot device, traits, maintenance, inventory. Each route
 * parses, authorises, calls one operation and renders; a route calling an operation that runs on the node's
 * owner declares it (`calls`), and the forwarding sends it there.
 */
export function nodesPlugin(deps: ApiDeps) {
  return async (app: FastifyInstance): Promise<void> => {
    type Handler<R extends Request> = (deps: ApiDeps, request: R, reply: FastifyReply) => Promise<unknown>;
    const on =
      <R extends Request>(handler: Handler<R>) =>
      (request: R, reply: FastifyReply) =>
        handler(deps, request, reply);
    const node = "/v1/nodes/:ident";

    nodeHistory(app, deps);
    const pages = new PageBuffers();
    app.get("/v1/nodes", listNodes(deps, false, pages));
    app.get("/v1/nodes/detail", listNodes(deps, true, pages));
    app.post("/v1/nodes", (request, reply) => createNode(deps, request, reply));
    app.get<IdentParams>(node, on(getNode));
    app.patch<IdentParams>(node, calls(UPDATE_NODE), on(patch));
    app.delete<IdentParams>(node, calls(DELETE_NODE), on(remove));

    app.get<IdentParams>(`${node}/states`, on(actions.getStates));
    // the one route with a larger body: a config drive travels inside it (Ironic accepts up to 64 MiB)
    app.put<IdentParams>(
      `${node}/states/provision`,
      { bodyLimit: deps.config.api.maxProvisionBodyBytes, ...calls(PROVISION) },
      on(actions.provision),
    );
    app.put<IdentParams>(`${node}/states/raid`, calls(SET_RAID_CONFIG), on(actions.setRaid));
    app.get<IdentParams>(`${node}/steps`, on(actions.getSteps));
    app.put<IdentParams>(`${node}/states/power`, calls(CHANGE_POWER), on(actions.setPower));
    app.put<IdentParams>(`${node}/states/boot_mode`, calls(SET_BOOT_MODE), on(actions.putBootMode));
    app.put<IdentParams>(`${node}/states/secure_boot`, calls(SET_SECURE_BOOT), on(actions.putSecureBoot));
    app.get<IdentParams>(`${node}/validate`, calls(VALIDATE), on(actions.validate));
    app.get<IdentParams>(`${node}/management/boot_device`, calls(GET_BOOT_DEVICE), on(actions.bootDevice));
    app.get<IdentParams>(
      `${node}/management/boot_device/supported`,
      calls(SUPPORTED_BOOT_DEVICES),
      on(actions.supportedDevices),
    );
    app.put<IdentParams>(`${node}/management/boot_device`, calls(SET_BOOT_DEVICE), on(actions.putBootDevice));
    app.put<IdentParams>(`${node}/management/inject_nmi`, calls(INJECT_NMI), on(actions.putInjectNmi));

    app.get<IdentParams>(`${node}/traits`, on(sub.listTraits));
    app.put<IdentParams>(`${node}/traits`, calls(UPDATE_NODE), on(sub.replaceTraits));
    app.put<{ Params: { ident: string; trait: string } }>(
      `${node}/traits/:trait`,
      calls(UPDATE_NODE),
      on(sub.addTrait),
    );
    app.delete<IdentParams>(`${node}/traits`, calls(UPDATE_NODE), on(sub.removeTraits));
    app.delete<{ Params: { ident: string; trait: string } }>(
      `${node}/traits/:trait`,
      calls(UPDATE_NODE),
      on(sub.removeTrait),
    );
    app.put<IdentParams>(`${node}/maintenance`, calls(SET_MAINTENANCE), on(sub.maintenanceOn));
    app.delete<IdentParams>(`${node}/maintenance`, calls(SET_MAINTENANCE), on(sub.maintenanceOff));
    app.get<IdentParams>(`${node}/inventory`, on(sub.getInventory));
    app.get<IdentParams>(`${node}/children`, on(sub.listChildren));
    app.get<IdentParams>(`${node}/firmware`, on(sub.listFirmware));
    app.get<IdentParams>(`${node}/ports`, sub.nodePorts(deps, false));
    app.get<IdentParams>(`${node}/ports/detail`, sub.nodePorts(deps, true));
    nodeVifRoutes(app, deps);
    nodeIndicatorRoutes(app, deps);
    nodeVmediaRoutes(app, deps);
    nodeAllocationRoutes(app, deps);
    nodeConsoleRoutes(app, deps);
    nodeLogRoutes(app, deps);
  };
}
