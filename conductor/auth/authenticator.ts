import bcrypt from "bcryptjs";
import type { Logger } from "../../shared/log.ts";
import { CredentialCache } from "./credential-cache.ts";
import { NOAUTH_IDENTITY, type Identity } from "./identity.ts";
import { FailureLimiter } from "./rate-limit.ts";
import type { TokenService } from "./tokens.ts";
import type { UserRecord, UserStore } from "./user-store.ts";

/** What a request presents: its Authorization (or Keystone's X-Auth-Token) header and the address it came from. */
export interface Credentials {
  authorization: string | undefined;
  authToken?: string | undefined;
  source: string;
}

export type AuthResult =
  | { ok: true; identity: Identity }
  | {
      ok: false;
      status: 400 | 401 | 429 | 503;
      message: string;
      retryAfterS?: number;
      /** Keystone's hint (`Keystone uri="…"`), answered instead of the Basic realm. */
      wwwAuthenticate?: string;
      /** Why, for the log only (never sent). */
      reason?: string;
    };

export interface Authenticator {
  readonly strategy: "noauth" | "http_basic" | "keystone";
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

// one address may stand for many people (NAT, a bastion): it gets more tries than one user from it
const SOURCE_FACTOR = 5;
// a user name tried from many addresses (a spread guess) is still bounded, above what one source can reach
const USER_FACTOR = 20;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const utf8 = new TextDecoder("utf-8", { fatal: true });

/** The limiter key of one user name from one address (NUL cannot be in either). */
const userAt = (user: string, source: string): string => `${user}\u0000${source}`;

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
 * limited per user name and source address together, per source across names, and per name across all
 * sources at a higher ceiling (429 while over a limit), so a stranger elsewhere cannot lock a user out;
 * they are logged without the password.
 */
export class HttpBasicAuthenticator implements Authenticator {
  readonly strategy = "http_basic" as const;
  private readonly cache: CredentialCache<Identity>;
  /** per user name and source address */
  private readonly limiter: FailureLimiter;
  /** per source address, across user names */
  private readonly sourceLimiter: FailureLimiter;
  /** per user name, across source addresses (the global ceiling) */
  private readonly userLimiter: FailureLimiter;
  /** A digest for unknown users at the user file's strongest cost, made again when the file reloads. */
  private dummy: { generation: number; digest: Promise<string> } | undefined;

  constructor(private readonly options: HttpBasicOptions) {
    this.cache = new CredentialCache({ ttlMs: options.cacheTtlMs, maxEntries: 4096, now: options.now });
    this.limiter = new FailureLimiter({
      maxFailures: options.maxFailures,
      windowMs: options.failureWindowMs,
      now: options.now,
    });
    this.sourceLimiter = new FailureLimiter({
      maxFailures: options.maxFailures * SOURCE_FACTOR,
      windowMs: options.failureWindowMs,
      now: options.now,
    });
    this.userLimiter = new FailureLimiter({
      maxFailures: options.maxFailures * USER_FACTOR,
      windowMs: options.failureWindowMs,
      now: options.now,
    });
  }

  /**
   * What an unknown user's password is compared with: a digest at the cost of the file's strongest entry,
   * so an unknown name takes as long as the slowest real one (a fixed cost-10 digest answered in ~200 ms
   * where a cost-12 user took ~830 ms).
   */
  private dummyDigest(): Promise<string> {
    // the cost first: reading it looks for a reload, which moves the generation on
    const cost = this.options.users.strongestCost;
    const generation = this.options.users.generation;
    if (this.dummy?.generation !== generation)
      this.dummy = { generation, digest: bcrypt.hash("anvil-no-such-user", cost) };
    return this.dummy.digest;
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
      user === undefined ? 0 : this.limiter.retryAfterS(userAt(user, source)),
      user === undefined ? 0 : this.userLimiter.retryAfterS(user),
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
    const matches = await bcrypt.compare(password, record?.digest ?? (await this.dummyDigest()));
    if (!record || !matches) {
      this.failed({ user, source, reason: record ? "wrong password" : "unknown user" });
      return fail(401, "Incorrect username or password");
    }
    this.limiter.succeed(userAt(user, source));
    const identity = this.identityOf(user, record, "http_basic");
    this.cache.set(user, password, { value: identity, generation });
    return { ok: true, identity };
  }

  private async bearer(token: string, source: string): Promise<AuthResult> {
    const record = await this.options.tokens.verify(token, (name) => this.options.users.credential(name));
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
    if (what.user !== undefined) {
      this.limiter.fail(userAt(what.user, what.source));
      this.userLimiter.fail(what.user);
    }
    this.options.logger.warn(what, "authentication failed");
  }

  /** Forget verified credentials (the user files changed). */
  clearCache(): void {
    this.cache.clear();
    this.options.tokens.clearCache();
  }
}
