import type { FastifyInstance } from "fastify";
import type { ConductorMetrics } from "../metrics/metrics.ts";
import type { ApiDeps } from "./context.ts";
import { authorize } from "../auth/policy.ts";

/** GET /metrics: Prometheus text format; node gauges are counted by the store at scrape time. */
export function metricsPlugin(deps: ApiDeps, metrics: ConductorMetrics) {
  return async (app: FastifyInstance): Promise<void> => {
    app.get("/metrics", async (request, reply) => {
      authorize("anvil:metrics:get", request.identity);
      const [byState, byPower, byFault] = await Promise.all([
        deps.store.countNodesBy("provision_state"),
        deps.store.countNodesBy("power_state"),
        deps.store.countNodesBy("fault"),
      ]);
      delete byFault.none;
      metrics.setNodeCounts({ byState, byPower, byFault });
      metrics.setEventSubscribers(deps.events.subscribers);
      await reply.type(metrics.registry.contentType).send(await metrics.registry.metrics());
    });
  };
}
