import Fastify, { type FastifyInstance } from "fastify";
import { scrapeMetrics, type ScrapeSources } from "./scrape.ts";

/**
 * The separate metrics listener: plain HTTP, GET /metrics and nothing else, no authentication (which is why
 * the configuration keeps it on loopback unless told otherwise). Listening is the caller's business.
 */
export function buildMetricsListener(sources: ScrapeSources): FastifyInstance {
  const app = Fastify({ logger: false, forceCloseConnections: true });
  app.get("/metrics", async (_request, reply) => {
    const scraped = await scrapeMetrics(sources);
    await reply.type(scraped.contentType).send(scraped.text);
  });
  app.setNotFoundHandler(async (_request, reply) => {
    await reply.code(404).type("text/plain").send("only /metrics is served here\n");
  });
  return app;
}
