import { z } from "zod";

/**
 * Swarm deploys: agents writing the same image share byte ranges of the image as the store serves it (the
 * URL's bytes, compressed or qcow2 alike) in fixed chunks. The conductor is the tracker; these are the
 * frames of that conversation (part of the agent WebSocket protocol) and the peer-serving HTTP path.
 */

/** Bytes per chunk: large enough that a tracker round trip per chunk is noise, small enough to spread. */
export const SWARM_CHUNK_BYTES = 4 * 1024 * 1024;

const Id = z.string().min(1).max(128);
const Sha256Hex = z.string().regex(/^[0-9a-f]{64}$/, "expected a lower-case hex SHA-256");
const Index = z
  .number()
  .int()
  .nonnegative()
  .max(1 << 24);

/**
 * The URL an agent serves its chunks at: http://, or https:// when its peer links are TLS (keyed by the
 * wave's secret, see the agent's peer TLS); an address and port, no path beyond "/", no credentials, no query.
 */
export const PeerEndpointSchema = z
  .string()
  .max(256)
  .refine(
    (text) => peerEndpointScheme(text) !== null,
    "expected http://ADDRESS:PORT/ or https://ADDRESS:PORT/",
  );

/** "http" or "https" for a well-formed peer endpoint, else null. Never throws. */
export function peerEndpointScheme(text: string): "http" | "https" | null {
  // an empty query or fragment ("…/?", "…/#") parses to none: refused as written, not normalised away
  if (text.length > 256 || /[?#]/.test(text)) return null;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return null;
  }
  if (
    url.username !== "" ||
    url.password !== "" ||
    url.pathname !== "/" ||
    url.search !== "" ||
    url.hash !== ""
  )
    return null;
  if (url.hostname === "") return null;
  return url.protocol === "http:" ? "http" : url.protocol === "https:" ? "https" : null;
}

/** Agent → conductor: join (or create) the wave of agents writing this image. */
export const SwarmJoinSchema = z.object({
  type: z.literal("swarm_join"),
  id: Id,
  /** The image URL without its query (a temporary URL's signature differs per node). */
  image: z.string().min(1).max(2048),
  /** The whole-image checksum as "algo:value", when the request had one: part of the wave's identity. */
  checksum: z.string().max(300).optional(),
  /** The object's size in bytes (the store's answer to a Range probe). */
  size: z.number().int().positive(),
  endpoint: PeerEndpointSchema,
});

/** Agent → conductor: where do I get chunk `index`? */
export const SwarmAskSchema = z.object({ type: z.literal("swarm_ask"), id: Id, wave: Id, index: Index });

/** Agent → conductor: I hold chunk `index` now, hashing to sha256 (fetched from the store when `store`). */
export const SwarmHaveSchema = z.object({
  type: z.literal("swarm_have"),
  wave: Id,
  index: Index,
  sha256: Sha256Hex,
  store: z.boolean(),
});

export const SWARM_DROP_REASONS = ["evicted", "bad_bytes", "unreachable", "stalled", "failed"] as const;
export type SwarmDropReason = (typeof SWARM_DROP_REASONS)[number];

/**
 * Agent → conductor: I no longer hold chunk `index` (evicted; failed: my store fetch of it failed), or the
 * peer `peer` failed me for it (bad bytes, unreachable, stalled).
 */
export const SwarmDropSchema = z.object({
  type: z.literal("swarm_drop"),
  wave: Id,
  index: Index,
  peer: Id.optional(),
  reason: z.enum(SWARM_DROP_REASONS),
});

/** Agent → conductor: done with the wave (written, or failed); my cache is gone. */
export const SwarmLeaveSchema = z.object({ type: z.literal("swarm_leave"), wave: Id });

export const SwarmPeerSchema = z.object({ node: Id, url: PeerEndpointSchema });
export type SwarmPeer = z.infer<typeof SwarmPeerSchema>;

export const SwarmAnswerSchema = z.discriminatedUnion("kind", [
  /** The wave's id, the bearer token its members serve chunks under, and the chunk size. */
  z.object({
    kind: z.literal("joined"),
    wave: Id,
    token: z.string().min(32).max(128),
    chunk_bytes: z.number().int().positive(),
  }),
  /** Fetch it from the store (you are its assignee, or the wait for its assignee ran out). */
  z.object({ kind: z.literal("store") }),
  /** These peers hold it; accept their bytes only if they hash to `sha256` (the store's, per its assignee). */
  z.object({ kind: z.literal("peers"), sha256: Sha256Hex, peers: z.array(SwarmPeerSchema).min(1).max(16) }),
  /** No swarm here (switched off, unknown wave): use the store. */
  z.object({ kind: z.literal("refused"), message: z.string().max(512) }),
]);
export type SwarmAnswer = z.infer<typeof SwarmAnswerSchema>;

/** Conductor → agent: the answer to a swarm_join or swarm_ask with the same id. */
export const SwarmReplySchema = z.object({
  type: z.literal("swarm_reply"),
  id: Id,
  answer: SwarmAnswerSchema,
});

/** A per-peer map from an agent's result: peers are nodes of one wave, so few (bounded like the peer list). */
const perPeer = <T extends z.ZodType>(value: T) =>
  z.record(Id, value).refine((map) => Object.keys(map).length <= 1024, "at most 1024 peers");

/** Per-deploy figures, in the write_image result (driver_internal_info.deploy_result.swarm) and its event. */
export const SwarmStatsSchema = z.object({
  wave: Id,
  chunk_bytes: z.number().int().positive(),
  bytes_from_store: z.number().int().nonnegative(),
  bytes_from_peers: z.number().int().nonnegative(),
  /** Bytes taken from each peer (by node UUID). */
  per_peer: perPeer(z.number().int().nonnegative()),
  /** Bytes served to other agents until this agent's write ended (it serves on for the linger time). */
  bytes_served: z.number().int().nonnegative(),
  /** Chunks a peer got wrong (hash mismatch) and that were fetched again from the store. */
  bad_chunks: z.number().int().nonnegative(),
  /** Peers dropped for the wave, and why. */
  dropped_peers: perPeer(z.string().max(64)),
  /** Set when the swarm stopped helping (tracker gone): the rest came from the store. */
  fallback: z.string().max(512).optional(),
  /** Chunks taken from the store (as assignee or fallback) and from peers. */
  chunks_from_store: z.number().int().nonnegative().optional(),
  chunks_from_peers: z.number().int().nonnegative().optional(),
  /** Peers' 503 answers (at their upload bound): each sent this agent to another peer or a later round. */
  busy_answers: z.number().int().nonnegative().optional(),
  /** Milliseconds, summed over chunks: waiting for the tracker's answers, receiving from peers, from the store. */
  ask_ms: z.number().nonnegative().optional(),
  peer_ms: z.number().nonnegative().optional(),
  store_ms: z.number().nonnegative().optional(),
  /** Milliseconds the image pipeline (hash, decode, write) waited for its next chunk: its starved time. */
  starved_ms: z.number().nonnegative().optional(),
});
export type SwarmStats = z.infer<typeof SwarmStatsSchema>;

/** The peer-serving path of chunk `index` of wave `wave`. */
export function chunkPath(wave: string, index: number): string {
  return `/swarm/${encodeURIComponent(wave)}/${index}`;
}

/**
 * Parses a peer request's path ("/swarm/<wave>/<index>"). Never throws: anything else is null.
 * Indices are decimal without leading zeros and below 2^24.
 */
export function parseChunkPath(path: string): { wave: string; index: number } | null {
  if (path.length > 300) return null;
  const match = /^\/swarm\/([A-Za-z0-9_-]{1,128})\/(0|[1-9]\d{0,7})$/.exec(path);
  if (!match) return null;
  const index = Number(match[2]);
  if (index >= 1 << 24) return null;
  return { wave: match[1] as string, index };
}

/** The token from an `Authorization: Bearer <token>` header, or null. Never throws. */
export function bearerToken(header: string | undefined): string | null {
  if (header === undefined || header.length > 300) return null;
  const match = /^Bearer ([A-Za-z0-9_-]{32,128})$/.exec(header);
  return match ? (match[1] as string) : null;
}

export const SWARM_PEER_TLS_MODES = ["link", "off"] as const;
export type SwarmPeerTlsMode = (typeof SWARM_PEER_TLS_MODES)[number];

/** write_image's `swarm` argument: present means take part; the fields tune the agent's side. */
export const SwarmRequestSchema = z.object({
  /** Chunks fetched at once (the read-ahead window). Default 4. */
  window: z.number().int().min(1).max(32).optional(),
  /** A peer that sends nothing for this long is given up for the chunk. Default 10 s. */
  peer_stall_s: z.number().positive().max(300).optional(),
  /** Bytes of chunks kept to serve to peers. Default 256 MiB. */
  cache_bytes: z
    .number()
    .int()
    .positive()
    .max(16 * 1024 ** 3)
    .optional(),
  /** Seconds the agent keeps serving its chunks after its own write. Default 60. */
  linger_s: z.number().min(0).max(3600).optional(),
  /** Uploads to peers at once. Default 4. */
  max_uploads: z.number().int().min(1).max(64).optional(),
  /** How long the agent waits for a tracker answer (beyond this, the store). Default 60 s. */
  ask_timeout_s: z.number().positive().max(600).optional(),
  /**
   * Peer links: "link" (default) TLS when the agent's link to the conductor is TLS, plain when it is plain;
   * "off" plain HTTP whatever the link.
   */
  peer_tls: z.enum(SWARM_PEER_TLS_MODES).optional(),
});
export type SwarmRequest = z.infer<typeof SwarmRequestSchema>;
