import Fastify, { type FastifyInstance } from "fastify";
import { localImagesPlugin } from "../../images/local-images-plugin.ts";
import { bootFilesPlugin } from "./http-plugin.ts";

/**
 * A plain-HTTP listener for what firmware fetches: boot files under /boot/ and, when a local image root is
 * configured, images under /images/ (the deploy kernel and ramdisk). iPXE cannot check a lab CA, so with TLS
 * on the API these stay on HTTP here, as Ironic serves its http_root from a separate web server. Nothing here
 * is secret: agent tokens and config drives travel over the agent's WSS link.
 */
export function buildBootFilesListener(roots: { boot: string; images?: string }): FastifyInstance {
  const app = Fastify({ logger: false });
  void app.register(bootFilesPlugin, { prefix: "/boot", root: roots.boot });
  if (roots.images !== undefined)
    void app.register(localImagesPlugin, { prefix: "/images", root: roots.images });
  return app;
}
