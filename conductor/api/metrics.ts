import type { FastifyInstance } from "fastify";
import type { ConductorMetrics } from "../metrics/metrics.ts";
import { scrapeMetrics } from "../metrics/scrape.ts";
import type { ApiDeps } from "./context.ts";
import { authorize } from "../auth/policy.ts";

/** GET /metrics on the API (when no separate metrics listener is configured): system readers only. */
export function metricsPlugin(deps: ApiDeps, metrics: ConductorMetrics) {
  return async (app: FastifyInstance): Promise<void> => {
    app.get("/metrics", async (request, reply) => {
      authorize("anvil:metrics:get", request.identity);
      const scraped = await scrapeMetrics({ store: deps.store, events: deps.events, metrics });
      await reply.type(scraped.contentType).send(scraped.text);
    });
  };
}
