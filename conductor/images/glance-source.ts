import type { NodeRecord } from "../../shared/resources.ts";
import { Invalid } from "../errors.ts";
import type { ImageCache } from "./image-cache.ts";
import type { UrlSigner } from "./image-request.ts";
import {
  checkImageAccess,
  glanceChecksum,
  glanceImageId,
  type GlanceReader,
  type GlanceImage,
} from "./glance.ts";
import type { ImageLinks } from "./signed-links.ts";

/** The path prefix the conductor serves its image cache under (boot listener and API listener). */
export const CACHE_PREFIX = "/image-cache";

/** instance_info as the agent's request is built from it, and the hold on a cached image until released. */
export interface ResolvedSource {
  instanceInfo: Record<string, unknown>;
  release(): void;
}

/** Turns an image_source that names a Glance image into one the agent can fetch. */
export interface ImageSources {
  /** Ironic's validation: the image exists, is active and the node may use it. No-op for other sources. */
  check(node: Pick<NodeRecord, "instance_info" | "owner" | "lessee">, signal?: AbortSignal): Promise<void>;
  /**
   * instance_info with a Glance image_source replaced by a temporary URL and Glance's format, size and
   * digest; other sources come back as they are.
   */
  resolve(
    node: Pick<NodeRecord, "instance_info" | "owner" | "lessee">,
    signal?: AbortSignal,
  ): Promise<ResolvedSource>;
}

const AGENT_FORMATS = new Set(["raw", "qcow2"]);

/** Glance's swift location as swift://container/object for the Swift signer, or null. */
export function swiftObjectOf(image: GlanceImage): URL | null {
  const urls = [image.direct_url, ...(image.locations ?? []).map((l) => l.url)];
  for (const raw of urls) {
    if (!raw?.startsWith("swift")) continue;
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      continue;
    }
    const parts = url.pathname.split("/").filter((p) => p !== "");
    if (parts.length < 2) continue;
    const [container, object] = parts.slice(-2);
    return new URL(`swift://${container}/${object}`);
  }
  return null;
}

function glanceId(node: Pick<NodeRecord, "instance_info">): string | null {
  const source = node.instance_info.image_source;
  return typeof source === "string" ? glanceImageId(source) : null;
}

/** No Glance configured: Glance sources are refused with the reason; others pass. */
export const noGlance: ImageSources = {
  check(node) {
    return new Promise((resolve) => {
      if (glanceId(node) !== null)
        throw new Invalid(
          "instance_info.image_source names a Glance image, and this conductor has no glance settings",
        );
      resolve();
    });
  },
  async resolve(node) {
    await this.check(node);
    return { instanceInfo: node.instance_info, release: () => undefined };
  },
};

/**
 * Glance images through the conductor's service credentials: a Swift temporary URL when Glance keeps the
 * image in Swift and the conductor has Swift's key, else the conductor's cache behind a signed link.
 */
export class GlanceImageSources implements ImageSources {
  constructor(
    private readonly deps: {
      client: GlanceReader;
      cache: ImageCache;
      links: ImageLinks;
      /** swift:// signer (the conductor's Swift settings), when configured */
      swift?: UrlSigner;
      publicUrl(): string;
      linkLifetimeS: number;
      serviceProject?: string;
    },
  ) {}

  private async image(
    id: string,
    node: Pick<NodeRecord, "owner" | "lessee">,
    signal?: AbortSignal,
  ): Promise<GlanceImage> {
    const image = await this.deps.client.image(id, signal);
    await checkImageAccess(image, node, {
      serviceProject: this.deps.serviceProject,
      members: () => this.deps.client.members(id, signal),
    });
    if (!image.disk_format || !AGENT_FORMATS.has(image.disk_format))
      throw new Invalid(
        `Image ${id} has disk_format ${image.disk_format ?? "(none)"}; the agent writes raw and qcow2`,
      );
    return image;
  }

  async check(node: Pick<NodeRecord, "instance_info" | "owner" | "lessee">, signal?: AbortSignal) {
    const id = glanceId(node);
    if (id !== null) await this.image(id, node, signal);
  }

  async resolve(
    node: Pick<NodeRecord, "instance_info" | "owner" | "lessee">,
    signal?: AbortSignal,
  ): Promise<ResolvedSource> {
    const id = glanceId(node);
    if (id === null) return { instanceInfo: node.instance_info, release: () => undefined };
    const image = await this.image(id, node, signal);
    const checksum = glanceChecksum(image);
    if (!checksum) throw new Invalid(`Image ${id} has no checksum in Glance; it cannot be verified`);
    const described = {
      ...node.instance_info,
      image_disk_format: image.disk_format,
      image_os_hash_algo: checksum.algo,
      image_os_hash_value: checksum.value,
      image_checksum: undefined,
      ...(typeof image.size === "number" ? { image_size: image.size } : {}),
    };
    const swift = this.deps.swift ? swiftObjectOf(image) : null;
    if (swift && this.deps.swift) {
      return {
        instanceInfo: { ...described, image_source: this.deps.swift(swift) },
        release: () => undefined,
      };
    }
    const lease = await this.deps.cache.acquire(id, { checksum, size: image.size }, (s) =>
      this.deps.client.download(id, s),
    );
    const link = this.deps.links.sign(`${CACHE_PREFIX}/${lease.name}`, this.deps.linkLifetimeS);
    return {
      instanceInfo: { ...described, image_source: `${this.deps.publicUrl()}${link}` },
      release: () => lease.release(),
    };
  }
}
