import Fastify, { type FastifyInstance } from "fastify";
import { randomUUID } from "node:crypto";
import { allocationsPlugin } from "./allocations.ts";
import type { ApiDeps } from "./context.ts";
import { driversPlugin } from "./drivers.ts";
import { ApiError, errorBody, notAcceptableBody, toHttpError } from "./errors.ts";
import { eventsPlugin } from "./events.ts";
import { forwardToOwner } from "./forward.ts";
import { lookupPlugin } from "./lookup.ts";
import { metricsPlugin, type RequestStats } from "./metrics.ts";
import { MAX_VERSION_STRING, MIN_VERSION_STRING, parseVersionHeader } from "./microversion.ts";
import { nodesPlugin } from "./nodes.ts";
import { portsPlugin } from "./ports.ts";
import { rootPlugin } from "./root.ts";

const VERSION_HEADER = "x-openstack-ironic-api-version";
/** Configdrives travel inside provision requests: Ironic accepts up to 64 MiB. */
const BODY_LIMIT = 64 * 1024 * 1024;

/** The Ironic-compatible REST API as a fastify app (listen is the caller's business). */
export function buildApi(deps: ApiDeps): FastifyInstance {
  const app = Fastify({
    logger: false,
    bodyLimit: BODY_LIMIT,
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 500 },
    genReqId: () => `req-${randomUUID()}`,
  });

  // DELETE from the stock client carries Content-Type: application/octet-stream and no body
  app.addContentTypeParser("application/octet-stream", (_request, _payload, done) => done(null, undefined));
  // Clients send Content-Type: application/json on bodiless PUT/DELETE too: empty means no body.
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (_request, text, done) => {
    if (text === "") return done(null, undefined);
    try {
      done(null, JSON.parse(text as string) as unknown);
    } catch (error) {
      done(new ApiError(400, `Malformed JSON in the request body: ${(error as Error).message}`), undefined);
    }
  });

  app.decorateRequest("apiMinor", 1);
  app.addHook("onRequest", async (request, reply) => {
    reply.header("X-OpenStack-Ironic-API-Minimum-Version", MIN_VERSION_STRING);
    reply.header("X-OpenStack-Ironic-API-Maximum-Version", MAX_VERSION_STRING);
    reply.header("OpenStack-Request-Id", request.id);
    const header = request.headers[VERSION_HEADER];
    const parsed = parseVersionHeader(Array.isArray(header) ? header[0] : header);
    if (!parsed.ok) {
      await reply.code(parsed.status).send(notAcceptableBody(parsed.message));
      return reply;
    }
    request.apiMinor = parsed.minor;
    reply.header("X-OpenStack-Ironic-API-Version", `1.${parsed.minor}`);
  });

  const stats: RequestStats = { requests: 0 };
  app.addHook("onResponse", async () => {
    stats.requests++;
  });
  void app.register(metricsPlugin(deps, stats));

  app.setErrorHandler(async (error, request, reply) => {
    const { status, message } = toHttpError(error);
    if (status >= 500)
      deps.logger.error({ err: error, url: request.url, method: request.method }, "request failed");
    await reply.code(status).send(errorBody(message));
  });
  app.setNotFoundHandler(async (request, reply) => {
    await reply
      .code(404)
      .send(errorBody(`The resource could not be found: ${request.method} ${request.url.split("?")[0]}`));
  });

  // node actions run on the node's owner in a cluster (a no-op with one conductor)
  app.addHook("preHandler", forwardToOwner(deps));
  for (const plugin of [
    rootPlugin,
    nodesPlugin,
    portsPlugin,
    driversPlugin,
    allocationsPlugin,
    lookupPlugin,
    eventsPlugin,
  ]) {
    void app.register(plugin(deps));
  }
  return app;
}
