import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { VifAttachBody } from "../../shared/api.ts";
import { ATTACH_VIF, DETACH_VIF, LIST_VIFS, attachVif, detachVif, listVifs } from "../operations/vifs.ts";
import type { ApiDeps } from "./context.ts";
import { badRequest, notFound } from "./errors.ts";
import { type IdentParams, calls, nodeFor } from "./node-request.ts";

/** VIFs appeared in 1.28; naming the port or port group to use in 1.67. */
export const VIFS_MINOR = 28;
const VIF_TARGET_MINOR = 67;

function requireVersion(request: FastifyRequest): void {
  if (request.apiMinor < VIFS_MINOR) throw notFound("The resource could not be found.");
}

/** GET, POST /v1/nodes/{id}/vifs and DELETE /v1/nodes/{id}/vifs/{vif} (Ironic's NodeVIFController). */
export function nodeVifRoutes(app: FastifyInstance, deps: ApiDeps): void {
  const path = "/v1/nodes/:ident/vifs";
  app.get<IdentParams>(path, calls(LIST_VIFS), async (request) => {
    requireVersion(request);
    const node = await nodeFor(deps, request, "baremetal:node:vif:list");
    return { vifs: await listVifs(deps.provisioner, node) };
  });
  app.post<IdentParams>(path, calls(ATTACH_VIF), async (request, reply: FastifyReply) => {
    requireVersion(request);
    const node = await nodeFor(deps, request, "baremetal:node:vif:attach");
    const body = VifAttachBody.parse(request.body);
    const targeted = body.port_uuid !== undefined || body.portgroup_uuid !== undefined;
    if (targeted && request.apiMinor < VIF_TARGET_MINOR)
      throw badRequest("Unknown attribute(s): port_uuid, portgroup_uuid");
    if (body.port_uuid !== undefined && body.portgroup_uuid !== undefined)
      throw badRequest("Cannot specify both port_uuid and portgroup_uuid");
    await attachVif(deps.provisioner, node, body);
    await reply.code(204).send();
  });
  app.delete<{ Params: { ident: string; vif: string } }>(
    `${path}/:vif`,
    calls(DETACH_VIF),
    async (request, reply) => {
      requireVersion(request);
      const node = await nodeFor(deps, request, "baremetal:node:vif:detach");
      await detachVif(deps.provisioner, node, request.params.vif);
      await reply.code(204).send();
    },
  );
}
