import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { ConductorConfig } from "../config.ts";
import { GlanceClient, staticTokenSource, type TokenSource } from "./glance.ts";
import { GlanceImageSources, noGlance, type ImageSources } from "./glance-source.ts";
import { ImageCache } from "./image-cache.ts";
import { vmediaDirOf } from "./iso.ts";
import type { UrlSigner } from "./image-request.ts";
import type { ImageRoutes } from "./image-routes.ts";
import { ImageLinks, type LinkKeySource } from "./signed-links.ts";
import { createUrlSigner } from "./url-signer.ts";
import { CachedVmediaImages, type VmediaImages } from "./vmedia-images.ts";

/** One conductor's image side: the URL signer, Glance sources, the cache and the routes serving it. */
export interface ImageServing {
  sign: UrlSigner;
  sources: ImageSources;
  routes: ImageRoutes;
  cache: ImageCache;
  links: ImageLinks;
  /** Operators' virtual media images the conductor downloads (image_download_source local). */
  vmedia: VmediaImages;
  /** Loads the cluster's link key and the cache's index; before it no link is signed or accepted. */
  start(store: LinkKeySource): Promise<void>;
  /** Stops running Glance downloads. */
  stop(): void;
}

/** The cache directory: images.cache.dir, else <dataDir>/image-cache. */
export function imageCacheDir(config: ConductorConfig): string {
  return config.images.cache.dir ?? join(config.dataDir, "image-cache");
}

/**
 * Wires the image side of a conductor from its config. `tokens` (Keystone's service-token getter) replaces
 * the static glance.token when given.
 */
export function createImageServing(
  config: ConductorConfig,
  publicUrl: () => string,
  tokens?: TokenSource,
): ImageServing {
  const links = new ImageLinks();
  const sign = createUrlSigner(config, { publicUrl, links });
  if (config.images.localRoot) mkdirSync(config.images.localRoot, { recursive: true });
  const glance = config.glance;
  let sources: ImageSources = noGlance;
  const dir = imageCacheDir(config);
  // the routes resolve the directory when the listener starts, before start() reads it
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  // Glance images and operators' virtual media images share one bound
  const cache = new ImageCache({ dir, maxBytes: config.images.cache.maxBytes });
  if (glance) {
    sources = new GlanceImageSources({
      client: new GlanceClient({
        endpoint: glance.endpoint,
        tokens: tokens ?? staticTokenSource(glance.token),
        headers: glance.headers,
        timeoutMs: glance.timeoutS * 1000,
      }),
      cache,
      links,
      ...(config.images.swift ? { swift: sign } : {}),
      publicUrl,
      linkLifetimeS: config.images.urlExpiresS,
      serviceProject: glance.serviceProject,
    });
  }
  const vmediaDir = vmediaDirOf(config.dataDir);
  mkdirSync(vmediaDir, { recursive: true, mode: 0o700 });
  const routes: ImageRoutes = {
    links,
    vmediaDir,
    ...(config.images.localRoot ? { localRoot: config.images.localRoot } : {}),
    ...(config.images.publicDir !== undefined ? { publicDir: config.images.publicDir } : {}),
    cache,
  };
  const vmedia = new CachedVmediaImages({
    cache,
    links,
    publicUrl,
    linkLifetimeS: config.images.urlExpiresS,
  });
  return {
    sign,
    sources,
    routes,
    cache,
    links,
    vmedia,
    async start(store) {
      await links.load(store);
      await cache.open();
    },
    stop() {
      cache.close();
    },
  };
}
