import Fastify, { type FastifyInstance } from "fastify";
import { randomUUID } from "node:crypto";
import { parseJsonBody } from "./body.ts";
import { noAuth } from "../auth/authenticator.ts";
import { registerAuth } from "../auth/fastify-auth.ts";
import { allocationsPlugin } from "./allocations.ts";
import { chassisPlugin } from "./chassis.ts";
import { deployTemplatesPlugin } from "./deploy-templates.ts";
import { runbooksPlugin } from "./runbooks.ts";
import { inspectionRulesPlugin } from "./inspection-rules.ts";
import { volumePlugin } from "./volume.ts";
import type { ApiDeps } from "./context.ts";
import { driversPlugin } from "./drivers.ts";
import { shardsPlugin } from "./shards.ts";
import { ApiError, errorBody, notAcceptableBody, toHttpError } from "./errors.ts";
import { eventsPlugin } from "./events.ts";
import { forwardToOwner } from "./forward.ts";
import { lookupPlugin } from "./lookup.ts";
import { continueInspectionPlugin } from "./continue-inspection.ts";
import { metricsPlugin } from "./metrics.ts";
import { MAX_VERSION_STRING, MIN_VERSION_STRING, parseVersionHeader } from "./microversion.ts";
import { nodesPlugin } from "./nodes.ts";
import { portgroupsPlugin } from "./portgroups.ts";
import { portsPlugin } from "./ports.ts";
import { rootPlugin } from "./root.ts";

const VERSION_HEADER = "x-openstack-ironic-api-version";

/** The Ironic-compatible REST API as a fastify app (listen is the caller's business). */
export function buildApi(deps: ApiDeps): FastifyInstance {
  const app = Fastify({
    // NOTE: with https fastify types the instance for https.Server; the API only uses what both share
    ...((deps.tls ? { https: { cert: deps.tls.cert, key: deps.tls.key } } : {}) as object),
    logger: false,
    // the provision endpoint, which carries config drives, raises this on its route
    bodyLimit: deps.config.api.maxBodyBytes,
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 500 },
    genReqId: () => `req-${randomUUID()}`,
    // a stopping conductor closes every client connection: a keep-alive socket whose response body the client
    // left unread kept close() waiting ~70 s (seen under load in CI)
    forceCloseConnections: true,
  });

  // DELETE from the stock client carries Content-Type: application/octet-stream and no body
  app.addContentTypeParser("application/octet-stream", (_request, _payload, done) => done(null, undefined));
  // Clients send Content-Type: application/json on bodiless PUT/DELETE too: empty means no body.
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (_request, text, done) => {
    try {
      done(null, parseJsonBody(text as string, { maxDepth: deps.config.api.maxJsonDepth }));
    } catch (error) {
      done(error instanceof ApiError ? error : new ApiError(400, String(error)), undefined);
    }
  });

  // before anything else, as Ironic's auth middleware wraps its app
  registerAuth(
    app,
    {
      ...(deps.auth ?? { authenticator: noAuth }),
      ...(deps.peers ? { peers: { auth: deps.peers, self: () => deps.membership.identity } } : {}),
    },
    deps.logger,
  );
  app.decorateRequest("apiMinor", 1);
  app.addHook("onRequest", async (request, reply) => {
    reply.header("OpenStack-Request-Id", request.id);
    // 1.107: the header other OpenStack services answer with, mirroring Ironic's own
    reply.header("X-OpenStack-Request-Id", request.id);
    // Ironic answers the version document at / without any microversion headers.
    if (request.url === "/" || request.url.startsWith("/?")) return;
    reply.header("X-OpenStack-Ironic-API-Minimum-Version", MIN_VERSION_STRING);
    reply.header("X-OpenStack-Ironic-API-Maximum-Version", MAX_VERSION_STRING);
    const header = request.headers[VERSION_HEADER];
    const parsed = parseVersionHeader(Array.isArray(header) ? header[0] : header);
    if (!parsed.ok) {
      await reply.code(parsed.status).send(notAcceptableBody(parsed.message));
      return reply;
    }
    request.apiMinor = parsed.minor;
    reply.header("X-OpenStack-Ironic-API-Version", `1.${parsed.minor}`);
  });

  app.addHook("onResponse", async (request, reply) => {
    // the route pattern, not the URL, so node names and uuids don't explode the label set
    const route = request.routeOptions.url ?? "unmatched";
    deps.metrics.observeRequest(
      { method: request.method, route, status: reply.statusCode },
      reply.elapsedTime / 1000,
    );
    // One line per request, carrying the id the client got in OpenStack-Request-Id, so an error a user
    // reports can be found in the log; refused requests are worth an operator's eye, the rest is debug.
    const line = {
      request_id: request.id,
      method: request.method,
      url: request.url.split("?")[0],
      status: reply.statusCode,
      ms: Math.round(reply.elapsedTime),
      remote: request.ip,
    };
    if (reply.statusCode >= 400) deps.logger.info(line, "request refused");
    else deps.logger.debug(line, "request");
  });
  // with a separate metrics listener the API has no /metrics (a 404 like any unknown path)
  if (deps.config.metrics.listen === undefined) void app.register(metricsPlugin(deps, deps.metrics));

  app.setErrorHandler(async (error, request, reply) => {
    const { status, message } = toHttpError(error);
    if (status >= 500)
      deps.logger.error(
        { err: error, request_id: request.id, url: request.url, method: request.method },
        "request failed",
      );
    await reply.code(status).send(errorBody(message, status));
  });
  app.setNotFoundHandler(async (request, reply) => {
    await reply
      .code(404)
      .send(errorBody(`The resource could not be found: ${request.method} ${request.url.split("?")[0]}`));
  });

  // node actions run on the node's owner in a cluster (a no-op with one conductor)
  forwardToOwner(app, deps);
  for (const plugin of [
    rootPlugin,
    nodesPlugin,
    portsPlugin,
    portgroupsPlugin,
    driversPlugin,
    allocationsPlugin,
    lookupPlugin,
    continueInspectionPlugin,
    eventsPlugin,
    chassisPlugin,
    volumePlugin,
    deployTemplatesPlugin,
    runbooksPlugin,
    inspectionRulesPlugin,
    shardsPlugin,
  ]) {
    void app.register(plugin(deps));
  }
  return app;
}
