import { createHmac, randomBytes } from "node:crypto";

/**
 * Credentials whose bcrypt check passed, for a short while: bcrypt per request costs ~50-100 ms of CPU.
 * The key is an HMAC of user and password under a secret made at start, so the map never holds a password
 * or anything a stolen heap dump could brute-force offline without the secret; entries die after `ttlMs` and
 * all of them at a reload of the user files (a changed password must not keep working).
 */
export class CredentialCache<T> {
  private readonly secret = randomBytes(32);
  private readonly entries = new Map<string, { value: T; expiresAt: number; generation: number }>();

  constructor(private readonly options: { ttlMs: number; maxEntries: number; now?: () => number }) {}

  private key(user: string, password: string): string {
    return createHmac("sha256", this.secret).update(user).update("\0").update(password).digest("base64");
  }

  get(user: string, password: string, generation: number): T | undefined {
    const key = this.key(user, password);
    const hit = this.entries.get(key);
    if (!hit) return undefined;
    if (hit.generation !== generation || hit.expiresAt <= this.now()) {
      this.entries.delete(key);
      return undefined;
    }
    return hit.value;
  }

  set(user: string, password: string, entry: { value: T; generation: number }): void {
    if (this.options.ttlMs <= 0) return;
    if (this.entries.size >= this.options.maxEntries) {
      // Map keeps insertion order: drop the oldest
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    this.entries.set(this.key(user, password), { ...entry, expiresAt: this.now() + this.options.ttlMs });
  }

  clear(): void {
    this.entries.clear();
  }

  get size(): number {
    return this.entries.size;
  }

  private now(): number {
    return (this.options.now ?? Date.now)();
  }
}
