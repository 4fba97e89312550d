import bcrypt from "bcryptjs";
import type { Logger } from "../../shared/log.ts";
import { CredentialCache } from "./credential-cache.ts";
import { NOAUTH_IDENTITY, type Identity } from "./identity.ts";
import { FailureLimiter } from "./rate-limit.ts";
import type { TokenService } from "./tokens.ts";
import type { UserRecord, UserStore } from "./user-store.ts";

/** What a request presents: its Authorization header and the address it came from. */
export interface Credentials {
  authorization: string | undefined;
  source: string;
}

export type AuthResult =
  | { ok: true; identity: Identity }
  | { ok: false; status: 400 | 401 | 429; message: string; retryAfterS?: number };

export interface Authenticator {
  readonly strategy: "noauth" | "http_basic";
  authenticate(credentials: Credentials): Promise<AuthResult>;
}

export const noAuth: Authenticator = {
  strategy: "noauth",
  authenticate: async () => ({ ok: true, identity: NOAUTH_IDENTITY }),
};

export interface HttpBasicOptions {
  users: UserStore;
  tokens: TokenService;
  logger: Logger;
  cacheTtlMs: number;
  maxFailures: number;
  failureWindowMs: number;
  now?: () => number;
}

// a user that does not exist still costs one bcrypt, so timing does not tell which names exist
const DUMMY_DIGEST = bcrypt.hashSync("anvil-no-such-user", 10);
const SOURCE_FACTOR = 5;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const utf8 = new TextDecoder("utf-8", { fatal: true });

const fail = (status: 400 | 401, message: string): AuthResult => ({ ok: false, status, message });

/** The user and password of a Basic token, or why not (Ironic's 400 messages). Never throws. */
export function decodeBasic(token: string): { user: string; password: string } | string {
  if (!BASE64.test(token) || token.length % 4 !== 0) return "Could not decode authorization token";
  const pair = Buffer.from(token, "base64");
  const colon = pair.indexOf(0x3a);
  if (colon < 0) return "Could not decode authorization token";
  try {
    return {
      user: utf8.decode(pair.subarray(0, colon)),
      password: pair.subarray(colon + 1).toString("utf8"),
    };
  } catch {
    return "Could not decode authorization token";
  }
}

/**
 * Ironic's http_basic (an Apache htpasswd file, bcrypt only), plus Anvil's bearer tokens. Failed logins are
 * limited per source address and per user name (429 while over the limit) and logged without the password.
 */
export class HttpBasicAuthenticator implements Authenticator {
  readonly strategy = "http_basic" as const;
  private readonly cache: CredentialCache<Identity>;
  private readonly limiter: FailureLimiter;
  private readonly sourceLimiter: FailureLimiter;

  constructor(private readonly options: HttpBasicOptions) {
    this.cache = new CredentialCache({ ttlMs: options.cacheTtlMs, maxEntries: 4096, now: options.now });
    this.limiter = new FailureLimiter({
      maxFailures: options.maxFailures,
      windowMs: options.failureWindowMs,
      now: options.now,
    });
    // one address may stand for many people (NAT, a bastion): it gets more tries than one user name
    this.sourceLimiter = new FailureLimiter({
      maxFailures: options.maxFailures * SOURCE_FACTOR,
      windowMs: options.failureWindowMs,
      now: options.now,
    });
  }

  async authenticate({ authorization, source }: Credentials): Promise<AuthResult> {
    if (authorization === undefined) return fail(401, "Authorization required");
    const parts = authorization.trim().split(/\s+/);
    if (parts.length !== 2 || !parts[0] || !parts[1])
      return fail(400, "Could not parse Authorization header");
    const [scheme, token] = parts as [string, string];
    const limited = this.limited(source);
    if (limited) return limited;
    if (scheme.toLowerCase() === "bearer") return this.bearer(token, source);
    if (scheme.toLowerCase() !== "basic") return fail(400, `Unsupported authorization type "${scheme}"`);
    const decoded = decodeBasic(token);
    if (typeof decoded === "string") return fail(400, decoded);
    return this.basic(decoded.user, decoded.password, source);
  }

  private limited(source: string, user?: string): AuthResult | undefined {
    const wait = Math.max(
      this.sourceLimiter.retryAfterS(source),
      user === undefined ? 0 : this.limiter.retryAfterS(user),
    );
    if (wait === 0) return undefined;
    return {
      ok: false,
      status: 429,
      message: `Too many failed logins; retry in ${wait} seconds`,
      retryAfterS: wait,
    };
  }

  private async basic(user: string, password: string, source: string): Promise<AuthResult> {
    const limited = this.limited(source, user);
    if (limited) return limited;
    const record = this.options.users.lookup(user);
    const generation = this.options.users.generation;
    const cached = record && this.cache.get(user, password, generation);
    if (cached) return { ok: true, identity: cached };
    const matches = await bcrypt.compare(password, record?.digest ?? DUMMY_DIGEST);
    if (!record || !matches) {
      this.failed({ user, source, reason: record ? "wrong password" : "unknown user" });
      return fail(401, "Incorrect username or password");
    }
    this.limiter.succeed(user);
    const identity = this.identityOf(user, record, "http_basic");
    this.cache.set(user, password, { value: identity, generation });
    return { ok: true, identity };
  }

  private bearer(token: string, source: string): AuthResult {
    const record = this.options.tokens.verify(token);
    const user = record && this.options.users.lookup(record.user);
    if (!record || !user) {
      this.failed({ source, reason: "invalid token" });
      return fail(401, "Invalid, expired or revoked token");
    }
    return { ok: true, identity: this.identityOf(record.user, user, "token") };
  }

  private identityOf(user: string, record: UserRecord, method: Identity["method"]): Identity {
    if (!this.options.users.hasRolesFile) return { user, role: "admin", project: null, method };
    return { user, role: record.roles?.role ?? null, project: record.roles?.project ?? null, method };
  }

  private failed(what: { user?: string; source: string; reason: string }): void {
    this.sourceLimiter.fail(what.source);
    if (what.user !== undefined) this.limiter.fail(what.user);
    this.options.logger.warn(what, "authentication failed");
  }

  /** Forget verified credentials (the user files changed). */
  clearCache(): void {
    this.cache.clear();
  }
}
