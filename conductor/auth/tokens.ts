import { createHash, randomBytes, randomUUID } from "node:crypto";

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

const digestOf = (token: string): string => createHash("sha256").update(token).digest("hex");

/**
 * Bearer tokens for the anvil CLI and the dashboard: random 256-bit values, kept only as SHA-256 digests
 * (a digest is as good as a password hash for a value with that much entropy), expiring, revocable.
 * They live in this process: a restart revokes them all.
 */
export class TokenService {
  private readonly byDigest = new Map<string, TokenRecord>();

  constructor(private readonly options: { ttlS: number; now?: () => number; maxTokens?: number }) {}

  issue(user: string, ttlS?: number): IssuedToken {
    this.sweep();
    if (this.byDigest.size >= (this.options.maxTokens ?? 100_000)) throw new Error("too many live tokens");
    const token = `anvil_${randomBytes(32).toString("base64url")}`;
    const now = this.now();
    const lifetime = Math.min(ttlS ?? this.options.ttlS, this.options.ttlS);
    const record: TokenRecord = {
      id: randomUUID(),
      user,
      createdAt: new Date(now).toISOString(),
      expiresAt: new Date(now + lifetime * 1000).toISOString(),
    };
    this.byDigest.set(digestOf(token), record);
    return { ...record, token };
  }

  /** The live record of a token, or undefined (unknown, revoked or expired). */
  verify(token: string): TokenRecord | undefined {
    const digest = digestOf(token);
    const record = this.byDigest.get(digest);
    if (!record) return undefined;
    if (Date.parse(record.expiresAt) <= this.now()) {
      this.byDigest.delete(digest);
      return undefined;
    }
    return record;
  }

  get(id: string): TokenRecord | undefined {
    for (const record of this.byDigest.values()) if (record.id === id) return record;
    return undefined;
  }

  /** Revokes by id; true if it was live. */
  revoke(id: string): boolean {
    for (const [digest, record] of this.byDigest) {
      if (record.id === id) return this.byDigest.delete(digest);
    }
    return false;
  }

  /** Revokes every token of a user (their password changed, they left). */
  revokeUser(user: string): number {
    let count = 0;
    for (const [digest, record] of this.byDigest) {
      if (record.user === user) count += Number(this.byDigest.delete(digest));
    }
    return count;
  }

  list(user?: string): TokenRecord[] {
    this.sweep();
    return [...this.byDigest.values()].filter((r) => user === undefined || r.user === user);
  }

  private sweep(): void {
    const now = this.now();
    for (const [digest, record] of this.byDigest)
      if (Date.parse(record.expiresAt) <= now) this.byDigest.delete(digest);
  }

  private now(): number {
    return (this.options.now ?? Date.now)();
  }
}
