import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

/** The query parameters of a signed image link. */
export const LINK_PARAMS = { expires: "anvil_expires", signature: "anvil_sig" } as const;

/** The row in the shared secrets table holding the key every conductor of a cluster signs links with. */
export const LINK_KEY_NAME = "image-links";

/** Where the key comes from: the cluster's database (insert-if-absent, so all conductors share one). */
export interface LinkKeySource {
  sharedSecret(name: string, candidate: string): Promise<string>;
}

export type LinkCheck = "ok" | "expired" | "invalid";

const KEY_BYTES = 32;
const SIGNATURE = /^[A-Za-z0-9_-]{43}$/;
const EXPIRES = /^[1-9][0-9]{0,11}$/;

function mac(key: Buffer, path: string, expires: number): Buffer {
  return createHmac("sha256", key).update(`GET\n${expires}\n${path}`).digest();
}

/**
 * The two parameters of a link's query string, or null unless it holds exactly one of each and nothing
 * else, well formed. Never throws (it reads what any client sends).
 */
export function parseLinkQuery(query: string): { expires: number; signature: Buffer } | null {
  if (query.length > 256) return null;
  let params: URLSearchParams;
  try {
    params = new URLSearchParams(query);
  } catch {
    return null;
  }
  const keys = [...params.keys()];
  if (keys.length !== 2) return null;
  const expires = params.getAll(LINK_PARAMS.expires);
  const signature = params.getAll(LINK_PARAMS.signature);
  if (expires.length !== 1 || signature.length !== 1) return null;
  if (!EXPIRES.test(expires[0]!) || !SIGNATURE.test(signature[0]!)) return null;
  const bytes = Buffer.from(signature[0]!, "base64url");
  // the last character carries 2 spare bits: only the canonical spelling counts (no malleable twins)
  if (bytes.toString("base64url") !== signature[0]) return null;
  return { expires: Number(expires[0]), signature: bytes };
}

/**
 * HMAC-SHA256 links to what a conductor serves itself (/images/, /image-cache/): the signature covers the
 * method, the expiry and the path exactly as sent, so no other file, time or method verifies. The key is
 * shared by every conductor on the database, so a link one signs verifies on any other and across restarts.
 */
export class ImageLinks {
  private key: Buffer | null = null;

  constructor(private readonly now: () => number = Date.now) {}

  /** Loads the cluster's key from the database, creating it if this is the first conductor. */
  async load(source: LinkKeySource): Promise<void> {
    const stored = await source.sharedSecret(LINK_KEY_NAME, randomBytes(KEY_BYTES).toString("base64url"));
    const key = Buffer.from(stored, "base64url");
    if (key.length < KEY_BYTES) throw new Error(`the stored ${LINK_KEY_NAME} key is shorter than 32 bytes`);
    this.key = key;
  }

  /** Whether load() has run (a conductor that never started cannot sign or verify). */
  get ready(): boolean {
    return this.key !== null;
  }

  /**
   * `path` (URL-encoded, from the first "/") with its expiry and signature appended.
   * @throws Error before load()
   */
  sign(path: string, lifetimeS: number): string {
    const key = this.requireKey();
    const expires = Math.floor(this.now() / 1000) + lifetimeS;
    const signature = mac(key, path, expires).toString("base64url");
    return `${path}?${LINK_PARAMS.expires}=${expires}&${LINK_PARAMS.signature}=${signature}`;
  }

  /** Checks a request's raw URL (path and query as sent). Constant-time on the signature. */
  check(rawUrl: string): LinkCheck {
    if (this.key === null) return "invalid";
    const at = rawUrl.indexOf("?");
    if (at < 0) return "invalid";
    const parsed = parseLinkQuery(rawUrl.slice(at + 1));
    if (!parsed) return "invalid";
    const expected = mac(this.key, rawUrl.slice(0, at), parsed.expires);
    if (parsed.signature.length !== expected.length || !timingSafeEqual(parsed.signature, expected))
      return "invalid";
    return parsed.expires * 1000 <= this.now() ? "expired" : "ok";
  }

  private requireKey(): Buffer {
    if (this.key === null) throw new Error("image links are signed only once the conductor has started");
    return this.key;
  }
}
