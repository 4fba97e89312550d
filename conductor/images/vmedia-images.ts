import { randomBytes } from "node:crypto";
import { Readable } from "node:stream";
import { Invalid } from "../errors.ts";
import { CACHE_PREFIX } from "./glance-source.ts";
import type { CacheLease, ImageCache } from "./image-cache.ts";
import type { ImageLinks } from "./signed-links.ts";

/**
 * Images an operator attaches as virtual media with `image_download_source: local` (Ironic's default for
 * API 1.89): the conductor downloads them and the BMC reads them from the conductor.
 */
export interface VmediaImages {
  /**
   * Downloads `url` for the node's device (replacing what that device held) and answers the signed link the
   * BMC reads it from. @throws Invalid (download refused, too large)
   */
  publish(request: { node: string; device: string; url: string }, signal?: AbortSignal): Promise<string>;
  /** Drops what the node's devices hold (every device of the node for null). */
  unpublish(node: string, devices: readonly string[] | null): Promise<void>;
}

export interface CachedVmediaImagesOptions {
  cache: ImageCache;
  links: ImageLinks;
  publicUrl(): string;
  linkLifetimeS: number;
  /** Bound on one download. Default 300 s. */
  timeoutMs?: number;
}

/** Drops a URL's query and credentials for a message (a presigned URL's signature stays out of logs). */
export function shownUrl(url: URL): string {
  return `${url.protocol}//${url.host}${url.pathname}`;
}

/**
 * `local` virtual media through the conductor's image cache, behind signed `/image-cache/` links: each attach
 * downloads afresh under a name of its own (an operator's URL may serve new content under the same name), the
 * copy is leased while attached and removed on detach. NOTE: leases live in memory; after a restart an
 * attached copy is only an unleased cache entry (evictable), as Ironic's copy outlives it on disk.
 */
export class CachedVmediaImages implements VmediaImages {
  private readonly held = new Map<string, CacheLease>();

  constructor(private readonly options: CachedVmediaImagesOptions) {}

  async publish(
    request: { node: string; device: string; url: string },
    signal?: AbortSignal,
  ): Promise<string> {
    await this.unpublish(request.node, [request.device]);
    const name = `vmedia-${request.device}-${request.node}-${randomBytes(6).toString("hex")}`;
    const lease = await this.options.cache.acquire(name, { checksum: null }, (stopping) =>
      this.download(request.url, signal ? AbortSignal.any([stopping, signal]) : stopping),
    );
    this.held.set(`${request.node} ${request.device}`, lease);
    const link = this.options.links.sign(`${CACHE_PREFIX}/${name}`, this.options.linkLifetimeS);
    return `${this.options.publicUrl()}${link}`;
  }

  async unpublish(node: string, devices: readonly string[] | null): Promise<void> {
    for (const [key, lease] of [...this.held]) {
      const [owner, device] = key.split(" ");
      if (owner !== node || (devices !== null && !devices.includes(device ?? ""))) continue;
      this.held.delete(key);
      lease.release();
      await this.options.cache.discard(lease.name);
    }
  }

  private async download(location: string, signal: AbortSignal): Promise<Readable> {
    const url = new URL(location);
    const bound = AbortSignal.any([signal, AbortSignal.timeout(this.options.timeoutMs ?? 300_000)]);
    let response: Response;
    try {
      response = await fetch(url, { signal: bound });
    } catch (error) {
      const reason =
        error instanceof Error ? (error.cause instanceof Error ? error.cause : error).message : "";
      throw new Invalid(`Failed to download image ${shownUrl(url)}: ${reason}`);
    }
    if (!response.ok || !response.body) {
      await response.body?.cancel();
      throw new Invalid(`Failed to download image ${shownUrl(url)}: HTTP ${response.status}`);
    }
    return Readable.fromWeb(response.body);
  }
}
