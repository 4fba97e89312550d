import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { ApiDeps } from "./context.ts";
import { parseQuery } from "./query.ts";
import { authorize } from "../auth/policy.ts";

const EventsQuery = z.object({ node: z.string().max(255).optional() }).strict();

/** GET /v1/events: server-sent events with provision, power and progress changes (beyond Ironic). */
export function eventsPlugin(deps: ApiDeps) {
  return async (app: FastifyInstance): Promise<void> => {
    app.get("/v1/events", async (request, reply) => {
      const query = parseQuery(EventsQuery, request.query);
      authorize("anvil:events:get", request.identity);
      let nodeUuid: string | undefined;
      if (query.node) nodeUuid = (await deps.store.getNode(query.node))?.uuid ?? query.node;
      reply.hijack();
      const res = reply.raw;
      res.writeHead(200, {
        "Content-Type": "text/event-stream",
        "Cache-Control": "no-cache",
        Connection: "keep-alive",
      });
      res.write(": anvil event stream\n\n");
      const unsubscribe = deps.events.subscribe((event) => {
        if (nodeUuid && event.node !== nodeUuid) return;
        res.write(`id: ${event.seq}\nevent: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`);
      });
      const keepalive = setInterval(() => res.write(": keepalive\n\n"), 15_000);
      request.raw.on("close", () => {
        clearInterval(keepalive);
        unsubscribe();
      });
    });
  };
}
