import type { Readable } from "node:stream";
import { Readable as NodeReadable } from "node:stream";
import type { ReadableStream as WebReadableStream } from "node:stream/web";
import { z } from "zod";
import { CHECKSUM_ALGOS } from "../../shared/image.ts";
import { ConductorError, Forbidden, Invalid, NotFound } from "../errors.ts";
import { readBounded } from "../../shared/read-bounded.ts";

/**
 * Where the conductor's service token for Glance comes from. A static one from config or the environment
 * today; with Keystone, the service-token getter implements it. The token never leaves the conductor: it is
 * sent to Glance only, never logged, never put in a URL or handed to a node.
 */
export interface TokenSource {
  token(signal?: AbortSignal): Promise<string | undefined>;
}

export function staticTokenSource(token: string | undefined): TokenSource {
  return { token: () => Promise.resolve(token) };
}

/** The most a Glance record or member list may hold before it is refused as unreadable. */
const MAX_RECORD_BYTES = 1024 * 1024;

const UUID = /^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$/i;

/**
 * The Glance image id of an image_source, or null when it is not a Glance reference: Ironic's rule, a bare
 * UUID or `glance://<uuid>` (anything after the last "/").
 */
export function glanceImageId(source: string): string | null {
  if (UUID.test(source)) return source;
  if (!source.startsWith("glance://")) return null;
  const id = source.slice(source.lastIndexOf("/") + 1);
  if (!UUID.test(id)) throw new Invalid(`Invalid image href ${source}.`);
  return id;
}

/** The fields of Glance's v2 image record the conductor uses (others pass). */
export const GlanceImageSchema = z
  .object({
    id: z.string(),
    status: z.string(),
    visibility: z.enum(["public", "community", "shared", "private"]).optional(),
    owner: z.string().nullish(),
    disk_format: z.string().nullish(),
    container_format: z.string().nullish(),
    size: z.number().int().nonnegative().nullish(),
    checksum: z.string().nullish(),
    os_hash_algo: z.string().nullish(),
    os_hash_value: z.string().nullish(),
    direct_url: z.string().optional(),
    locations: z.array(z.object({ url: z.string() }).loose()).optional(),
  })
  .loose();
export type GlanceImage = z.infer<typeof GlanceImageSchema>;

/** The strongest digest Glance gives for an image that the agent can verify, or null when none. */
export function glanceChecksum(
  image: GlanceImage,
): { algo: (typeof CHECKSUM_ALGOS)[number]; value: string } | null {
  const algo = CHECKSUM_ALGOS.find((a) => a === image.os_hash_algo);
  if (algo && image.os_hash_value) return { algo, value: image.os_hash_value.toLowerCase() };
  if (image.checksum) return { algo: "md5", value: image.checksum.toLowerCase() };
  return null;
}

/** Glance unreachable or answering 5xx: retryable, 503 at the API. */
export class GlanceUnavailable extends ConductorError {
  constructor(message: string) {
    super(503, message);
  }
}

export interface GlanceClientOptions {
  endpoint: string;
  tokens: TokenSource;
  headers?: Record<string, string>;
  timeoutMs?: number;
}

/** What the conductor reads from Glance (GlanceClient; fakes in tests). */
export interface GlanceReader {
  image(id: string, signal?: AbortSignal): Promise<GlanceImage>;
  members(id: string, signal?: AbortSignal): Promise<string[]>;
  download(id: string, signal?: AbortSignal): Promise<Readable>;
}

/** Glance's v2 image API, as the conductor's service user. */
export class GlanceClient implements GlanceReader {
  constructor(private readonly options: GlanceClientOptions) {}

  private async headers(signal?: AbortSignal): Promise<Record<string, string>> {
    const token = await this.options.tokens.token(signal);
    return { ...this.options.headers, ...(token ? { "X-Auth-Token": token } : {}) };
  }

  private async get(path: string, signal?: AbortSignal, timeout = true): Promise<Response> {
    const url = `${this.options.endpoint.replace(/\/+$/, "")}${path}`;
    const signals = [signal, timeout ? AbortSignal.timeout(this.options.timeoutMs ?? 30_000) : undefined];
    try {
      return await fetch(url, {
        headers: await this.headers(signal),
        signal: AbortSignal.any(signals.filter((s): s is AbortSignal => s !== undefined)),
        redirect: "error",
      });
    } catch (error) {
      if (signal?.aborted) throw error;
      // the endpoint and the cause, never the headers (the token)
      throw new GlanceUnavailable(
        `Connection to glance endpoint ${this.options.endpoint} failed: ${(error as Error).message}`,
      );
    }
  }

  private async failure(response: Response, id: string): Promise<never> {
    await response.body?.cancel();
    switch (response.status) {
      case 401:
      case 403:
        throw new Forbidden(`Not authorized for image ${id}.`);
      case 404:
        throw new NotFound(`Image ${id} could not be found.`);
      default:
        if (response.status >= 500)
          throw new GlanceUnavailable(`Glance answered ${response.status} for image ${id}`);
        throw new Invalid(`Glance answered ${response.status} for image ${id}`);
    }
  }

  /** A JSON answer read up to 1 MiB (an image record is a few kB); null when unreadable or too large. */
  private async json(response: Response): Promise<unknown> {
    if (!response.body) return null;
    try {
      return JSON.parse((await readBounded(response.body, MAX_RECORD_BYTES)).toString("utf8")) as unknown;
    } catch {
      return null;
    }
  }

  /** GET /v2/images/{id}. @throws NotFound, Forbidden, GlanceUnavailable, Invalid (unreadable record) */
  async image(id: string, signal?: AbortSignal): Promise<GlanceImage> {
    const response = await this.get(`/v2/images/${encodeURIComponent(id)}`, signal);
    if (!response.ok) return this.failure(response, id);
    const parsed = GlanceImageSchema.safeParse(await this.json(response));
    if (!parsed.success) throw new Invalid(`Glance's record of image ${id} is not an image`);
    return parsed.data;
  }

  /** The accepted member projects of a shared image (GET /v2/images/{id}/members). */
  async members(id: string, signal?: AbortSignal): Promise<string[]> {
    const response = await this.get(`/v2/images/${encodeURIComponent(id)}/members`, signal);
    if (!response.ok) return this.failure(response, id);
    const body = z
      .object({ members: z.array(z.object({ member_id: z.string(), status: z.string() }).loose()) })
      .safeParse(await this.json(response));
    if (!body.success) return [];
    return body.data.members.filter((m) => m.status === "accepted").map((m) => m.member_id);
  }

  /** GET /v2/images/{id}/file as a stream (no timeout: the caller bounds it). */
  async download(id: string, signal?: AbortSignal): Promise<Readable> {
    const response = await this.get(`/v2/images/${encodeURIComponent(id)}/file`, signal, false);
    if (!response.ok || !response.body) return this.failure(response, id);
    return NodeReadable.fromWeb(response.body as WebReadableStream<Uint8Array>);
  }
}

/**
 * Ironic's image checks before a deploy: the image is active, and the node may use it. Public and community
 * images are for anyone; a private image for its owner project being the node's owner or lessee, or the
 * conductor's own project; a shared one for an accepted member among those.
 * @throws Forbidden ("Not authorized for image …", Ironic's text), Invalid when not active
 */
export async function checkImageAccess(
  image: GlanceImage,
  node: { owner: string | null; lessee: string | null },
  options: { serviceProject?: string; members: () => Promise<string[]> },
): Promise<void> {
  if (image.status !== "active") {
    throw new Invalid(`Image ${image.id} is unacceptable: The image is required to be in an active state.`);
  }
  const projects = [node.owner, node.lessee, options.serviceProject].filter(
    (p): p is string => typeof p === "string" && p !== "",
  );
  const visibility = image.visibility ?? "shared";
  if (visibility === "public" || visibility === "community") return;
  if (visibility === "private" && image.owner && projects.includes(image.owner)) return;
  if (visibility === "shared") {
    if (image.owner && projects.includes(image.owner)) return;
    const members = await options.members();
    if (projects.some((p) => members.includes(p))) return;
  }
  throw new Forbidden(`Not authorized for image ${image.id}.`);
}
