import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

/** A console token's claims: which node's console, until when (seconds since the epoch). */
export interface ConsoleClaims {
  node: string;
  expires: number;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * Short-lived tokens that open one node's console WebSocket: `<node>.<expires>.<mac>`, HMAC-SHA256 under a
 * key this conductor draws at start and never shares. The console URL always points at the conductor that
 * minted it (the node's owner, where the session runs), so nothing else ever needs to check one; a restart
 * invalidates every token, and clients ask GET …/states/console again.
 */
export class ConsoleTokens {
  private readonly key: Buffer;
  private readonly ttlS: number;
  private readonly now: () => number;

  constructor(options: { ttlS?: number; key?: Buffer; now?: () => number } = {}) {
    this.key = options.key ?? randomBytes(32);
    this.ttlS = options.ttlS ?? 300;
    this.now = options.now ?? Date.now;
  }

  private mac(body: string): string {
    return createHmac("sha256", this.key).update(body).digest("base64url");
  }

  /** A token for `node`'s console, valid for the configured lifetime from now. */
  mint(node: string): string {
    const body = `${node}.${Math.floor(this.now() / 1000) + this.ttlS}`;
    return `${body}.${this.mac(body)}`;
  }

  /** The claims of a genuine, unexpired token, or null (forged, malformed, expired: never a reason why). */
  verify(token: string): ConsoleClaims | null {
    if (token.length > 200) return null;
    const parts = token.split(".");
    if (parts.length !== 3) return null;
    const [node, expiresText, mac] = parts as [string, string, string];
    if (!UUID.test(node) || !/^\d{1,12}$/.test(expiresText)) return null;
    const expected = Buffer.from(this.mac(`${node}.${expiresText}`));
    const given = Buffer.from(mac);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
    const expires = Number(expiresText);
    if (expires * 1000 <= this.now()) return null;
    return { node, expires };
  }
}
