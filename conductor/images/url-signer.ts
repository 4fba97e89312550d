import { relative, resolve, sep } from "node:path";
import { publicUrlOf } from "../config.ts";
import type { ConductorConfig } from "../config.ts";
import { Invalid } from "../errors.ts";
import type { UrlSigner } from "./image-request.ts";
import { s3PresignedUrl } from "./s3-presign.ts";
import type { ImageLinks } from "./signed-links.ts";
import { swiftTempUrl } from "./swift-tempurl.ts";

/** The path a file:// image has under the conductor's local image root, or null when outside it. */
export function localImagePath(root: string, file: string): string | null {
  const rel = relative(resolve(root), resolve(file));
  if (rel === "" || rel.startsWith("..") || rel.split(sep).includes("..")) return null;
  return rel.split(sep).map(encodeURIComponent).join("/");
}

/**
 * Turns swift://container/object, s3://bucket/key and file:///path into temporary HTTP(S) URLs the agent
 * fetches directly (the conductor never carries image bytes, except file:// for small setups).
 * @throws Invalid for a scheme that is not configured
 */
export function createUrlSigner(
  config: ConductorConfig,
  options: {
    now?: () => number;
    /** The conductor's own URL, for file:// images it serves itself. */
    publicUrl?: () => string;
    /** Signs the links to file:// images the conductor serves (the cluster's key). */
    links?: ImageLinks;
  } = {},
): UrlSigner {
  const images = config.images;
  const now = options.now ?? Date.now;
  const publicUrl = options.publicUrl ?? (() => publicUrlOf(config));
  return (source) => {
    const expiresS = Math.floor(now() / 1000) + images.urlExpiresS;
    const objectPath = decodeURIComponent(source.pathname.replace(/^\/+/, ""));
    switch (source.protocol) {
      case "swift:": {
        if (!images.swift) throw new Invalid("swift:// images need the conductor's Swift settings");
        return swiftTempUrl({
          endpoint: images.swift.endpoint,
          path: `/v1/${images.swift.account}/${source.host}/${objectPath}`,
          key: images.swift.tempUrlKey,
          expires: expiresS,
          digest: images.swift.digest,
        });
      }
      case "s3:": {
        if (!images.s3) throw new Invalid("s3:// images need the conductor's S3 settings");
        return s3PresignedUrl({
          ...images.s3,
          bucket: source.host,
          key: objectPath,
          expiresIn: images.urlExpiresS,
          now: new Date(now()),
        });
      }
      case "file:": {
        if (!images.localRoot) throw new Invalid("file:// images need the conductor's local image root");
        const path = localImagePath(images.localRoot, decodeURIComponent(source.pathname));
        if (path === null)
          throw new Invalid(`${source.pathname} is outside the conductor's local image root`);
        if (!options.links) throw new Invalid("file:// images need the conductor's image link key");
        return `${publicUrl()}${options.links.sign(`/images/${path}`, images.urlExpiresS)}`;
      }
      default:
        throw new Invalid(`image_source scheme ${source.protocol} is not supported`);
    }
  };
}
