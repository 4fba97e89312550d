import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import type { DeployLogInfo } from "../history/deploy-logs.ts";
import {
  COLLECT_DEPLOY_LOGS,
  READ_DEPLOY_LOGS,
  collectDeployLogs,
  deployLogFiles,
  listDeployLogs,
  readDeployLog,
} from "../operations/deploy-logs.ts";
import { baseUrl, type ApiDeps } from "./context.ts";
import { type IdentParams, calls, nodeFor } from "./node-request.ts";
import { parseQuery } from "./query.ts";

type LogParams = { Params: { ident: string; id: string } };

const LogQuery = z.strictObject({ format: z.enum(["tar.gz", "text"]).optional() });

function logView(request: FastifyRequest<IdentParams>, info: DeployLogInfo): Record<string, unknown> {
  // links name the node as the request did, as Ironic's do
  const href = `nodes/${request.params.ident}/logs/${encodeURIComponent(info.id)}`;
  const url = baseUrl(request);
  return {
    ...info,
    links: [
      { href: `${url}/v1/${href}`, rel: "self" },
      { href: `${url}/${href}`, rel: "bookmark" },
    ],
  };
}

/** The files of an archive as one text: each under a `==> name <==` line, as `tail` prints several files. */
function asText(files: readonly { name: string; data: Buffer }[]): string {
  return files.map((file) => `==> ${file.name} <==\n${file.data.toString("utf8")}\n`).join("\n");
}

function wantsText(request: FastifyRequest, format: "tar.gz" | "text" | undefined): boolean {
  if (format !== undefined) return format === "text";
  const accept = request.headers.accept ?? "";
  return accept.includes("text/plain") && !accept.includes("application/gzip");
}

/**
 * Anvil's deploy logs (Ironic keeps them as files or Swift objects with no API): the node's list, one
 * archive as Ironic stores it (gzip tar) or as text, and a collection on request while its agent is connected.
 */
export function nodeLogRoutes(app: FastifyInstance, deps: ApiDeps): void {
  const path = "/v1/nodes/:ident/logs";
  app.get<IdentParams>(path, calls(READ_DEPLOY_LOGS), async (request) => {
    parseQuery(z.strictObject({}), request.query);
    const node = await nodeFor(deps, request, "baremetal:node:get", "baremetal:node:deploy_logs:get");
    const logs = await listDeployLogs(deps.provisioner, node);
    return { logs: logs.map((info) => logView(request, info)) };
  });
  app.get<LogParams>(`${path}/:id`, calls(READ_DEPLOY_LOGS), async (request, reply: FastifyReply) => {
    const { format } = parseQuery(LogQuery, request.query);
    const node = await nodeFor(deps, request, "baremetal:node:get", "baremetal:node:deploy_logs:get");
    const { info, archive } = await readDeployLog(deps.provisioner, node, request.params.id);
    if (wantsText(request, format))
      return reply
        .type("text/plain; charset=utf-8")
        .send(asText(await deployLogFiles(deps.provisioner, archive)));
    return reply
      .type("application/gzip")
      .header("Content-Disposition", `attachment; filename="${info.id}.tar.gz"`)
      .send(archive);
  });
  app.post<IdentParams>(path, calls(COLLECT_DEPLOY_LOGS), async (request, reply: FastifyReply) => {
    parseQuery(z.strictObject({}), request.query);
    const node = await nodeFor(deps, request, "baremetal:node:get", "baremetal:node:deploy_logs:collect");
    const info = await collectDeployLogs(deps.provisioner, node);
    const view = logView(request, info);
    return reply
      .code(201)
      .header("Location", `${baseUrl(request)}/v1/nodes/${node.uuid}/logs/${encodeURIComponent(info.id)}`)
      .send(view);
  });
}
