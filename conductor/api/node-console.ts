import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { parseStrictBool, unrecognizedBool } from "../../shared/strict-bool.ts";
import { GET_CONSOLE, SET_CONSOLE, type ConsoleService } from "../operations/console.ts";
import { Invalid } from "../errors.ts";
import { type ApiDeps, baseUrl } from "./context.ts";
import { badRequest } from "./errors.ts";
import { type IdentParams, calls, nodeFor } from "./node-request.ts";

/**
 * The body of PUT …/states/console as Ironic's `@args.validate(enabled=args.boolean)` reads it: `enabled`
 * required and a strict boolean, nothing else. @throws ApiError(400) in Ironic's words
 */
export function parseConsoleBody(body: unknown): boolean {
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw badRequest("Missing mandatory parameter: enabled");
  const fields = body as Record<string, unknown>;
  const extra = Object.keys(fields).filter((key) => key !== "enabled");
  if (extra.length > 0) throw badRequest(`Unexpected arguments: ${extra.join(", ").slice(0, 200)}`);
  if (!("enabled" in fields)) throw badRequest("Missing mandatory parameter: enabled");
  const enabled = parseStrictBool(fields.enabled);
  if (enabled === undefined) throw badRequest(`Invalid enabled: ${unrecognizedBool(fields.enabled)}`);
  return enabled;
}

function serviceOf(deps: ApiDeps, driver: string): ConsoleService {
  if (deps.console === undefined)
    throw new Invalid(`Driver ${driver} does not support console (disabled or not implemented).`);
  return deps.console;
}

/** GET and PUT /v1/nodes/{id}/states/console (Ironic's NodeConsoleController), both run on the node's owner. */
export function nodeConsoleRoutes(app: FastifyInstance, deps: ApiDeps): void {
  const path = "/v1/nodes/:ident/states/console";
  app.get<IdentParams>(path, calls(GET_CONSOLE), async (request: FastifyRequest<IdentParams>) => {
    const node = await nodeFor(deps, request, "baremetal:node:get_console");
    return serviceOf(deps, node.driver).info(node, baseUrl(request));
  });
  app.put<IdentParams>(
    path,
    calls(SET_CONSOLE),
    async (request: FastifyRequest<IdentParams>, reply: FastifyReply) => {
      const enabled = parseConsoleBody(request.body);
      const node = await nodeFor(deps, request, "baremetal:node:set_console_state");
      await serviceOf(deps, node.driver).setMode(node, enabled);
      await reply
        .code(202)
        .header("Location", `${baseUrl(request)}/v1/nodes/${node.uuid}/states/console`)
        .send();
    },
  );
}
