import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { ApiDeps } from "./context.ts";
import { ApiError } from "./errors.ts";
import { parseQuery } from "./query.ts";
import { authorize } from "../auth/policy.ts";

const EventsQuery = z.object({ node: z.string().max(255).optional() }).strict();

const KEEPALIVE_MS = 15_000;

/**
 * One SSE frame per event, whatever the number of subscribers: the hub hands every listener the same
 * object, so it is serialised once (100 dashboards cost one JSON.stringify per event, not 100).
 */
const frames = new WeakMap<object, string>();
function frameOf(event: { seq: number; type: string }): string {
  let frame = frames.get(event);
  if (frame === undefined) {
    frame = `id: ${event.seq}\nevent: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;
    frames.set(event, frame);
  }
  return frame;
}

/**
 * GET /v1/events: server-sent events with provision, power and progress changes (beyond Ironic).
 * At most `events.maxSubscribers` at once (503 beyond). A subscriber that stops reading is disconnected
 * once `events.maxBufferedBytes` wait for it, so one stalled client costs a bounded amount of memory and
 * never slows the others (it may reconnect; events it missed are gone).
 */
export function eventsPlugin(deps: ApiDeps) {
  return async (app: FastifyInstance): Promise<void> => {
    const { maxSubscribers, maxBufferedBytes } = deps.config.events;
    let subscribers = 0;
    app.get("/v1/events", async (request, reply) => {
      const query = parseQuery(EventsQuery, request.query);
      authorize("anvil:events:get", request.identity);
      if (subscribers >= maxSubscribers) {
        void reply.header("Retry-After", "5");
        throw new ApiError(
          503,
          `The event stream has ${maxSubscribers} subscribers, its limit; retry later.`,
        );
      }
      let nodeUuid: string | undefined;
      if (query.node) nodeUuid = (await deps.store.getNode(query.node))?.uuid ?? query.node;
      subscribers += 1;
      reply.hijack();
      const res = reply.raw;
      let done = false;
      const write = (text: string): void => {
        if (done) return;
        if (res.writableLength > maxBufferedBytes) {
          deps.logger.warn(
            { buffered: res.writableLength, remote: request.ip },
            "event subscriber is not reading; disconnecting it",
          );
          res.destroy();
          return;
        }
        res.write(text);
      };
      res.writeHead(200, {
        "Content-Type": "text/event-stream",
        "Cache-Control": "no-cache",
        Connection: "keep-alive",
      });
      res.write(": anvil event stream\n\n");
      const unsubscribe = deps.events.subscribe((event) => {
        if (nodeUuid && event.node !== nodeUuid) return;
        write(frameOf(event));
      });
      const keepalive = setInterval(() => write(": keepalive\n\n"), KEEPALIVE_MS);
      res.on("close", () => {
        if (done) return;
        done = true;
        subscribers -= 1;
        clearInterval(keepalive);
        unsubscribe();
      });
    });
  };
}
