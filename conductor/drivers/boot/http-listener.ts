import Fastify, { type FastifyInstance } from "fastify";
import { registerImageRoutes, type ImageRoutes } from "../../images/image-routes.ts";
import { bootFilesPlugin } from "./http-plugin.ts";

/**
 * A plain-HTTP listener for what firmware fetches: boot files under /boot/ and, when a local image root is
 * configured, images under /images/ and the Glance image cache under /image-cache/, both only through signed,
 * expiring links. iPXE cannot check a lab CA, so with TLS on the API these stay on HTTP here, as Ironic serves
 * its http_root from a separate web server. Nothing here is secret: agent tokens and config drives travel over
 * the agent's WSS link, and an image link is good for one file until it expires.
 */
export function buildBootFilesListener(roots: { boot: string; images?: ImageRoutes }): FastifyInstance {
  const app = Fastify({ logger: false, forceCloseConnections: true });
  void app.register(bootFilesPlugin, { prefix: "/boot", root: roots.boot });
  if (roots.images) registerImageRoutes(app, roots.images);
  return app;
}
