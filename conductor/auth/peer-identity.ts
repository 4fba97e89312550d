import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { z } from "zod";
import { Role, type Identity } from "./identity.ts";

/**
 * The headers of a call one conductor forwards to another. `by` alone (no secret, noauth) only says "serve it
 * here"; with a cluster secret all six travel and the MAC covers them.
 */
export const PEER_HEADERS = {
  by: "x-anvil-forwarded-by",
  to: "x-anvil-forwarded-to",
  identity: "x-anvil-forwarded-identity",
  at: "x-anvil-forwarded-at",
  nonce: "x-anvil-forwarded-nonce",
  mac: "x-anvil-forwarded-mac",
} as const;
const PEER_HEADER_NAMES: readonly string[] = Object.values(PEER_HEADERS);

/** Does the request carry any forwarding header (its own, or a peer's)? */
export function hasPeerHeaders(headers: Record<string, unknown>): boolean {
  return PEER_HEADER_NAMES.some((name) => headers[name] !== undefined);
}

/** Only the forwarding headers that are not `by`: a client claiming an identity or a MAC. */
export function claimsIdentity(headers: Record<string, unknown>): boolean {
  return PEER_HEADER_NAMES.some((name) => name !== PEER_HEADERS.by && headers[name] !== undefined);
}

/** Who asked the forwarding conductor, as it asserts to the owner. */
export interface Asserted {
  identity: Identity;
  /** the client's address as the forwarding conductor saw it */
  client: string;
}

const AssertedWire = z
  .object({
    user: z.string().min(1).max(255),
    role: Role.nullable(),
    project: z.string().min(1).max(255).nullable(),
    method: z.enum(["noauth", "http_basic", "token", "keystone"]),
    client: z.string().min(1).max(64),
  })
  .strict();

export type PeerCheck = { ok: true; asserted: Asserted; from: string } | { ok: false; reason: string };

/** The shared_secrets row of the key conductors sign forwarded calls with when no secret file is set. */
export const PEER_KEY_NAME = "cluster-peers";

/** The least a cluster secret holds: 32 bytes, as much as the MAC's key can use. */
export const MIN_SECRET_BYTES = 32;

/**
 * The cluster secret file's contents (surrounding whitespace trimmed).
 * @throws Error when it is unreadable, shorter than 32 bytes, or readable by group or others
 */
export function readClusterSecret(path: string): Buffer {
  const mode = statSync(path).mode;
  if ((mode & 0o077) !== 0)
    throw new Error(
      `cluster secret file ${path} is readable by others (mode ${(mode & 0o777).toString(8)}); chmod 600 it`,
    );
  const secret = Buffer.from(readFileSync(path, "utf8").trim(), "utf8");
  if (secret.length < MIN_SECRET_BYTES)
    throw new Error(
      `cluster secret file ${path} holds ${secret.length} bytes; it needs at least ${MIN_SECRET_BYTES} (openssl rand -hex 32)`,
    );
  return secret;
}

/**
 * Conductors' proof to each other that a forwarded call's identity comes from a conductor: HMAC-SHA256 under
 * the cluster secret over the method, the path, the sending and receiving conductors, a timestamp, a nonce and
 * the identity header. The receiver refuses a MAC that is wrong, older or newer than the window, meant for
 * another conductor, or seen before (nonces are kept for the window).
 */
export class PeerAuth {
  private readonly nonces = new Map<string, number>();
  private readonly windowMs: number;
  /** The key the MACs use: the configured secret, or the cluster's key read from the database at start. */
  private secret: Buffer | undefined;

  constructor(
    private readonly options: {
      /** absent: the key comes from the database (`loadKey`) before the conductor listens */
      secret?: Buffer;
      windowMs?: number;
      now?: () => number;
      maxNonces?: number;
    },
  ) {
    this.windowMs = options.windowMs ?? 30_000;
    this.secret = options.secret;
  }

  /**
   * Without a configured cluster secret, the key is one every conductor of the database shares: created by
   * the first to start (insert-if-absent), read by the rest. Whoever can read the database could forge a
   * peer, but could as well rewrite the nodes and tokens it holds; a secret file keeps the two apart.
   */
  async loadKey(source: { sharedSecret(name: string, candidate: string): Promise<string> }): Promise<void> {
    if (this.secret !== undefined) return;
    const key = await source.sharedSecret(PEER_KEY_NAME, randomBytes(MIN_SECRET_BYTES).toString("base64url"));
    this.secret = Buffer.from(key, "base64url");
  }

  /** The headers that assert `asserted` on a call from conductor `from` to conductor `to`. */
  sign(
    call: { method: string; url: string; from: string; to: string },
    asserted: Asserted,
  ): Record<string, string> {
    const identity = Buffer.from(
      JSON.stringify({ ...asserted.identity, client: asserted.client }),
      "utf8",
    ).toString("base64url");
    const at = String(this.now());
    const nonce = randomBytes(16).toString("hex");
    return {
      [PEER_HEADERS.by]: call.from,
      [PEER_HEADERS.to]: call.to,
      [PEER_HEADERS.identity]: identity,
      [PEER_HEADERS.at]: at,
      [PEER_HEADERS.nonce]: nonce,
      [PEER_HEADERS.mac]: this.mac({ ...call, at, nonce, identity }),
    };
  }

  /** Whether the request's forwarding headers are a peer's, meant for conductor `self`. Never throws. */
  verify(call: { method: string; url: string; self: string }, headers: Record<string, unknown>): PeerCheck {
    const value = (name: string): string | undefined => {
      const v = headers[name];
      return typeof v === "string" ? v : undefined;
    };
    const [from, to, identity, at, nonce, mac] = [
      value(PEER_HEADERS.by),
      value(PEER_HEADERS.to),
      value(PEER_HEADERS.identity),
      value(PEER_HEADERS.at),
      value(PEER_HEADERS.nonce),
      value(PEER_HEADERS.mac),
    ];
    if (!from || !to || !identity || !at || !nonce || !mac) return { ok: false, reason: "unsigned" };
    if (this.secret === undefined) return { ok: false, reason: "no cluster key yet" };
    const expected = Buffer.from(
      this.mac({ method: call.method, url: call.url, from, to, at, nonce, identity }),
      "hex",
    );
    const given = /^[0-9a-f]{64}$/.test(mac) ? Buffer.from(mac, "hex") : Buffer.alloc(0);
    if (given.length !== expected.length || !timingSafeEqual(given, expected))
      return { ok: false, reason: "bad MAC" };
    if (to !== call.self) return { ok: false, reason: "meant for another conductor" };
    const now = this.now();
    const sent = /^\d{1,16}$/.test(at) ? Number(at) : NaN;
    if (!(Math.abs(now - sent) <= this.windowMs)) return { ok: false, reason: "stale" };
    this.sweep(now);
    if (this.nonces.has(nonce)) return { ok: false, reason: "replayed" };
    if (this.nonces.size >= (this.options.maxNonces ?? 200_000))
      return { ok: false, reason: "too many calls" };
    this.nonces.set(nonce, sent + this.windowMs);
    let wire: unknown;
    try {
      wire = JSON.parse(Buffer.from(identity, "base64url").toString("utf8"));
    } catch {
      return { ok: false, reason: "malformed identity" };
    }
    const parsed = AssertedWire.safeParse(wire);
    if (!parsed.success) return { ok: false, reason: "malformed identity" };
    const { client, ...who } = parsed.data;
    return { ok: true, asserted: { identity: who, client }, from };
  }

  private mac(
    fields: Record<"method" | "url" | "from" | "to" | "at" | "nonce" | "identity", string>,
  ): string {
    const { method, url, from, to, at, nonce, identity } = fields;
    // NUL cannot appear in any of them (header values and a request line refuse it)
    if (this.secret === undefined) throw new Error("the cluster key is not loaded (PeerAuth.loadKey)");
    return createHmac("sha256", this.secret)
      .update(["anvil-forward-v1", method, url, from, to, at, nonce, identity].join("\0"))
      .digest("hex");
  }

  /** Drops the nonces whose window ended (they are kept roughly in the order they expire). */
  private sweep(now: number): void {
    for (const [nonce, until] of this.nonces) {
      if (until > now) break;
      this.nonces.delete(nonce);
    }
  }

  private now(): number {
    return (this.options.now ?? Date.now)();
  }
}
