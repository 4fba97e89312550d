import type { FastifyInstance } from "fastify";
import type { ApiDeps } from "./context.ts";
import { authorize } from "../auth/policy.ts";

/** Counts kept by the app's root hooks (plugin hooks would only see their own routes). */
export interface RequestStats {
  requests: number;
}

/** GET /metrics: Prometheus text format. */
export function metricsPlugin(deps: ApiDeps, stats: RequestStats) {
  return async (app: FastifyInstance): Promise<void> => {
    app.get("/metrics", async (request, reply) => {
      authorize("anvil:metrics:get", request.identity);
      const lines: string[] = ["# HELP anvil_nodes Nodes by provision state.", "# TYPE anvil_nodes gauge"];
      for (const [state, count] of Object.entries(await deps.store.countNodesByState())) {
        lines.push(`anvil_nodes{provision_state="${state}"} ${count}`);
      }
      const memory = process.memoryUsage();
      lines.push(
        "# HELP anvil_http_requests_total HTTP requests answered.",
        "# TYPE anvil_http_requests_total counter",
        `anvil_http_requests_total ${stats.requests}`,
        "# HELP anvil_event_subscribers Event stream clients.",
        "# TYPE anvil_event_subscribers gauge",
        `anvil_event_subscribers ${deps.events.subscribers}`,
        "# HELP process_resident_memory_bytes Resident memory.",
        "# TYPE process_resident_memory_bytes gauge",
        `process_resident_memory_bytes ${memory.rss}`,
      );
      await reply.type("text/plain; version=0.0.4").send(lines.join("\n") + "\n");
    });
  };
}
