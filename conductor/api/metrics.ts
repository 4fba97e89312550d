import type { FastifyInstance } from "fastify";
import { PROVISION_STATES } from "../../shared/states.ts";
import type { ApiDeps } from "./context.ts";

/** GET /metrics: Prometheus text format. */
export function metricsPlugin(deps: ApiDeps) {
  return async (app: FastifyInstance): Promise<void> => {
    let requests = 0;
    app.addHook("onResponse", async () => {
      requests++;
    });
    app.get("/metrics", async (_request, reply) => {
      const lines: string[] = ["# HELP anvil_nodes Nodes by provision state.", "# TYPE anvil_nodes gauge"];
      for (const state of PROVISION_STATES) {
        const count = (await deps.store.listNodes({ provision_state: state }, {})).length;
        if (count > 0) lines.push(`anvil_nodes{provision_state="${state}"} ${count}`);
      }
      const memory = process.memoryUsage();
      lines.push(
        "# HELP anvil_http_requests_total HTTP requests answered.",
        "# TYPE anvil_http_requests_total counter",
        `anvil_http_requests_total ${requests}`,
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
