import type { StoredToken, TokenStore } from "../db/store.ts";
import { createHash, createHmac, randomBytes, randomUUID, timingSafeEqual } from "node:crypto";

export interface TokenRecord {
  id: string;
  user: string;
  createdAt: string;
  expiresAt: string;
}

/** What POST /v1/auth/tokens answers: the token itself appears here and nowhere else. */
export interface IssuedToken extends TokenRecord {
  token: string;
}

export class TooManyTokens extends Error {
  constructor(user: string) {
    super(`User ${user} holds too many live tokens; revoke some first.`);
    this.name = "TooManyTokens";
  }
}

const digestOf = (token: string): string => createHash("sha256").update(token).digest("hex");
const fingerprintOf = (token: string, credential: string): string =>
  createHmac("sha256", token).update(credential).digest("hex");

const recordOf = (t: StoredToken): TokenRecord => ({
  id: t.id,
  user: t.user,
  createdAt: t.created_at,
  expiresAt: t.expires_at,
});

export interface TokenServiceOptions {
  store: TokenStore;
  ttlS: number;
  now?: () => number;
  /** How long a token read from the database is trusted here before it is read again (revocation delay). */
  cacheTtlMs?: number;
  maxCached?: number;
  maxPerUser?: number;
}

/**
 * Bearer tokens for the anvil CLI and the dashboard: random 256-bit values, kept only as SHA-256 digests in
 * the database all conductors share (a digest is as good as a password hash for a value with that much
 * entropy), expiring, revocable, and bound to the credential they were issued for (see `StoredToken`).
 * A few seconds' cache in front of the database keeps a token's cost near a cached password's.
 */
export class TokenService {
  private readonly cache = new Map<string, { token: StoredToken; until: number }>();

  constructor(private readonly options: TokenServiceOptions) {}

  /**
   * A new token for `user`, bound to `credential` (the user's entry as `credentialOf` renders it).
   * @throws TooManyTokens
   */
  async issue(user: string, credential: string, ttlS?: number): Promise<IssuedToken> {
    const token = `anvil_${randomBytes(32).toString("base64url")}`;
    const now = this.now();
    const lifetime = Math.min(ttlS ?? this.options.ttlS, this.options.ttlS);
    const stored: StoredToken = {
      id: randomUUID(),
      digest: digestOf(token),
      user,
      fingerprint: fingerprintOf(token, credential),
      created_at: new Date(now).toISOString(),
      expires_at: new Date(now + lifetime * 1000).toISOString(),
      revoked: false,
    };
    const added = await this.options.store.insertToken(stored, {
      now: new Date(now).toISOString(),
      maxPerUser: this.options.maxPerUser ?? 100,
    });
    if (!added) throw new TooManyTokens(user);
    return { ...recordOf(stored), token };
  }

  /**
   * The live record of a token whose user's credential is still the one it was issued for, or undefined
   * (unknown, revoked, expired, or the user's password, role or project changed, or the user is gone).
   * @param credentialOf the user's current entry (`credentialOf`), undefined when the user no longer exists
   */
  async verify(
    token: string,
    credentialOf: (user: string) => string | undefined,
  ): Promise<TokenRecord | undefined> {
    const stored = await this.lookup(digestOf(token));
    if (!stored || stored.revoked || Date.parse(stored.expires_at) <= this.now()) return undefined;
    const credential = credentialOf(stored.user);
    if (credential === undefined) return undefined;
    const expected = Buffer.from(stored.fingerprint, "hex");
    const actual = Buffer.from(fingerprintOf(token, credential), "hex");
    if (expected.length !== actual.length || !timingSafeEqual(expected, actual)) return undefined;
    return recordOf(stored);
  }

  async get(id: string): Promise<TokenRecord | undefined> {
    const stored = await this.options.store.tokenById(id);
    if (!stored || stored.revoked || Date.parse(stored.expires_at) <= this.now()) return undefined;
    return recordOf(stored);
  }

  /** Revokes by id (at once here; other conductors within the cache's few seconds); true if it was live. */
  async revoke(id: string): Promise<boolean> {
    for (const [digest, hit] of this.cache) if (hit.token.id === id) this.cache.delete(digest);
    return this.options.store.revokeToken(id);
  }

  async list(): Promise<TokenRecord[]> {
    return (await this.options.store.listTokens(new Date(this.now()).toISOString())).map(recordOf);
  }

  /** Forget what was read from the database (the user files changed). */
  clearCache(): void {
    this.cache.clear();
  }

  private async lookup(digest: string): Promise<StoredToken | null> {
    const now = this.now();
    const hit = this.cache.get(digest);
    if (hit && hit.until > now) return hit.token;
    if (hit) this.cache.delete(digest);
    const stored = await this.options.store.tokenByDigest(digest);
    const ttl = this.options.cacheTtlMs ?? 5000;
    // only tokens that exist are cached: unknown ones are failed logins, limited per source already
    if (stored && ttl > 0) {
      if (this.cache.size >= (this.options.maxCached ?? 4096)) {
        const oldest = this.cache.keys().next().value;
        if (oldest !== undefined) this.cache.delete(oldest);
      }
      this.cache.set(digest, { token: stored, until: now + ttl });
    }
    return stored;
  }

  private now(): number {
    return (this.options.now ?? Date.now)();
  }
}

/** Tokens in memory: the fake beside `TokenStore`, for unit tests and benches without a database. */
export class MemoryTokenStore implements TokenStore {
  readonly rows = new Map<string, StoredToken>();

  async insertToken(token: StoredToken, options: { now: string; maxPerUser: number }): Promise<boolean> {
    for (const [id, t] of this.rows) if (t.revoked || t.expires_at <= options.now) this.rows.delete(id);
    const held = [...this.rows.values()].filter((t) => t.user === token.user).length;
    if (held >= options.maxPerUser) return false;
    this.rows.set(token.id, { ...token });
    return true;
  }

  async tokenByDigest(digest: string): Promise<StoredToken | null> {
    for (const t of this.rows.values()) if (t.digest === digest) return { ...t };
    return null;
  }

  async tokenById(id: string): Promise<StoredToken | null> {
    const t = this.rows.get(id);
    return t ? { ...t } : null;
  }

  async listTokens(now: string): Promise<StoredToken[]> {
    return [...this.rows.values()].filter((t) => !t.revoked && t.expires_at > now).map((t) => ({ ...t }));
  }

  async revokeToken(id: string): Promise<boolean> {
    const t = this.rows.get(id);
    if (!t || t.revoked) return false;
    t.revoked = true;
    return true;
  }
}
