import type { FastifyInstance } from "fastify";
import { CACHE_PREFIX } from "./glance-source.ts";
import type { ImageCache } from "./image-cache.ts";
import { localImagesPlugin } from "./local-images-plugin.ts";
import type { ImageLinks } from "./signed-links.ts";

/** What a listener serves of images: file:// images under a root, the Glance cache; all behind signed links. */
export interface ImageRoutes {
  links: ImageLinks;
  localRoot?: string;
  /** Under localRoot, served without a link (deploy kernel and ramdisk). */
  publicDir?: string;
  cache?: ImageCache;
  /** Virtual-media ISOs, served under /vmedia/ through signed links (the BMC fetches them). */
  vmediaDir?: string;
}

/** Registers /images/ (local root), /image-cache/ (Glance cache) and /vmedia/ (ISOs) where configured. */
export function registerImageRoutes(app: FastifyInstance, routes: ImageRoutes): void {
  if (routes.localRoot !== undefined)
    void app.register(localImagesPlugin, {
      prefix: "/images",
      root: routes.localRoot,
      links: routes.links,
      ...(routes.publicDir !== undefined ? { publicDir: routes.publicDir } : {}),
    });
  if (routes.vmediaDir !== undefined)
    void app.register(localImagesPlugin, { prefix: "/vmedia", root: routes.vmediaDir, links: routes.links });
  const cache = routes.cache;
  if (cache)
    void app.register(localImagesPlugin, {
      prefix: CACHE_PREFIX,
      root: cache.dir,
      links: routes.links,
      onServe: (name) => cache.touch(name),
    });
}
