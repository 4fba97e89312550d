import { createHmac, randomBytes } from "node:crypto";
import { Agent, request } from "undici";
import { z } from "zod";
import type { Logger } from "../../shared/log.ts";
import type { AuthResult, Authenticator, Credentials } from "./authenticator.ts";
import { KeystoneTokenBody, identityFromToken, type KeystoneIdentity } from "./keystone-token.ts";
import { BodyTooLarge, readBounded } from "../../shared/read-bounded.ts";

/** Anvil's own credentials in Keystone (password auth, project scoped), as keystonemiddleware's [keystone_authtoken]. */
export interface KeystoneServiceCredentials {
  /** Keystone's identity URL, ending in /v3. */
  authUrl: string;
  username: string;
  password: string;
  userDomainName: string;
  projectName: string;
  projectDomainName: string;
}

/** Keystone did not answer usefully (down, 5xx, refused our service credentials): 503 for a new token. */
export class KeystoneUnavailable extends Error {
  constructor(message: string) {
    super(message);
    this.name = "KeystoneUnavailable";
  }
}

const MAX_BODY_BYTES = 1024 * 1024;
const TokenIssued = z.object({ token: z.object({ expires_at: z.string().max(64) }) });

/**
 * Keystone's v3 token API over a bounded undici pool with timeouts: Anvil's service token (obtained from its
 * credentials, again before expiry and on a 401) and the validation of users' tokens with it.
 */
export class KeystoneClient {
  private readonly agent: Agent;
  private service: { token: string; expiresAt: number } | undefined;
  private pending: Promise<string> | undefined;

  constructor(
    private readonly options: {
      credentials: KeystoneServiceCredentials;
      timeoutMs: number;
      maxConnections: number;
      now?: () => number;
    },
  ) {
    this.agent = new Agent({
      connections: options.maxConnections,
      connectTimeout: options.timeoutMs,
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
    });
  }

  private now(): number {
    return (this.options.now ?? Date.now)();
  }

  private url(path: string): string {
    return `${this.options.credentials.authUrl.replace(/\/+$/, "")}${path}`;
  }

  /** One call; a connection failure or timeout is KeystoneUnavailable. Bodies are read up to 1 MiB. */
  private async call(
    method: "GET" | "POST",
    path: string,
    init: { headers?: Record<string, string>; body?: unknown },
  ): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; json: unknown }> {
    let response: Awaited<ReturnType<typeof request>>;
    try {
      response = await request(this.url(path), {
        method,
        dispatcher: this.agent,
        headers: {
          Accept: "application/json",
          ...init.headers,
          ...(init.body === undefined ? {} : { "Content-Type": "application/json" }),
        },
        body: init.body === undefined ? undefined : JSON.stringify(init.body),
        signal: AbortSignal.timeout(this.options.timeoutMs),
      });
    } catch (error) {
      throw new KeystoneUnavailable(
        `Keystone unreachable: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
    let raw: Buffer;
    try {
      raw = await readBounded(response.body, MAX_BODY_BYTES);
    } catch (error) {
      if (error instanceof BodyTooLarge)
        throw new KeystoneUnavailable("Keystone's answer is larger than 1 MiB");
      throw new KeystoneUnavailable(
        `Keystone's answer broke off: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
    let json: unknown = undefined;
    try {
      json = raw.length ? JSON.parse(raw.toString("utf8")) : undefined;
    } catch {
      json = undefined;
    }
    return { status: response.statusCode, headers: response.headers, json };
  }

  /** Anvil's service token: kept until a minute before it expires, one request in flight at a time. */
  async serviceToken(force = false): Promise<string> {
    if (!force && this.service && this.service.expiresAt - 60_000 > this.now()) return this.service.token;
    this.pending ??= this.issueServiceToken().finally(() => {
      this.pending = undefined;
    });
    return this.pending;
  }

  private async issueServiceToken(): Promise<string> {
    const c = this.options.credentials;
    const answer = await this.call("POST", "/auth/tokens?nocatalog", {
      body: {
        auth: {
          identity: {
            methods: ["password"],
            password: {
              user: { name: c.username, domain: { name: c.userDomainName }, password: c.password },
            },
          },
          scope: { project: { name: c.projectName, domain: { name: c.projectDomainName } } },
        },
      },
    });
    const header = answer.headers["x-subject-token"];
    const token = Array.isArray(header) ? header[0] : header;
    const parsed = TokenIssued.safeParse(answer.json);
    if (answer.status !== 201 || !token || !parsed.success)
      throw new KeystoneUnavailable(`Keystone refused Anvil's service credentials (HTTP ${answer.status})`);
    const expiresAt = Date.parse(parsed.data.token.expires_at);
    this.service = { token, expiresAt: Number.isFinite(expiresAt) ? expiresAt : this.now() + 60_000 };
    return token;
  }

  /**
   * Keystone's word on a user's token: its body, or null when Keystone says it is not valid (404: unknown,
   * expired or revoked). A 401 means our service token went stale: obtained again and tried once more.
   * @throws KeystoneUnavailable
   */
  async validate(subject: string): Promise<unknown> {
    for (let attempt = 0; ; attempt++) {
      const service = await this.serviceToken(attempt > 0);
      const answer = await this.call("GET", "/auth/tokens?nocatalog", {
        headers: { "X-Auth-Token": service, "X-Subject-Token": subject },
      });
      if (answer.status === 200) return answer.json;
      if (answer.status === 404) return null;
      if (answer.status === 401 && attempt === 0) continue;
      throw new KeystoneUnavailable(`Keystone answered token validation with HTTP ${answer.status}`);
    }
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}

export interface KeystoneAuthOptions {
  client: Pick<KeystoneClient, "validate">;
  logger: Logger;
  /** The URL clients are told to get tokens from (WWW-Authenticate: Keystone uri="…"). */
  wwwAuthenticateUri: string;
  serviceProjectName: string;
  /** A validated token is trusted this long at most (and never past its expiry): the revocation window. */
  cacheWindowMs: number;
  cacheMaxEntries: number;
  now?: () => number;
}

/** A header value Keystone could have issued: printable ASCII, bounded (fernet tokens are ~200 bytes). */
const TOKEN = /^[\x21-\x7e]{1,8192}$/;

/**
 * Ironic's `auth_strategy = keystone`: X-Auth-Token validated by Keystone, its roles and scope mapped onto the
 * policy (keystone-token.ts). Validated tokens are cached under an HMAC of the token (never the token itself)
 * for min(expiry, cacheWindowMs), bounded in entries: a token revoked in Keystone keeps working here until its
 * entry ends, and a Keystone outage leaves cached tokens working for as long.
 */
export class KeystoneAuthenticator implements Authenticator {
  readonly strategy = "keystone" as const;
  private readonly secret = randomBytes(32);
  private readonly cache = new Map<string, { value: KeystoneIdentity; until: number }>();
  private readonly inFlight = new Map<string, Promise<AuthResult>>();
  private readonly wwwAuthenticate: string;

  constructor(private readonly options: KeystoneAuthOptions) {
    this.wwwAuthenticate = `Keystone uri="${options.wwwAuthenticateUri}"`;
  }

  private now(): number {
    return (this.options.now ?? Date.now)();
  }

  private key(token: string): string {
    return createHmac("sha256", this.secret).update(token).digest("base64");
  }

  private refuse(reason: string): AuthResult {
    return {
      ok: false,
      status: 401,
      message: "The request you have made requires authentication.",
      wwwAuthenticate: this.wwwAuthenticate,
      reason,
    };
  }

  async authenticate({ authToken, source }: Credentials): Promise<AuthResult> {
    if (authToken === undefined) return this.refuse("no X-Auth-Token");
    if (!TOKEN.test(authToken)) return this.refuse("malformed X-Auth-Token");
    const key = this.key(authToken);
    const hit = this.cache.get(key);
    if (hit) {
      if (hit.until > this.now()) return { ok: true, identity: hit.value.identity };
      this.cache.delete(key);
    }
    // one validation per token at a time: a burst with one new token asks Keystone once
    let pending = this.inFlight.get(key);
    if (!pending) {
      pending = this.validate(authToken, key, source).finally(() => this.inFlight.delete(key));
      this.inFlight.set(key, pending);
    }
    return pending;
  }

  private async validate(token: string, key: string, source: string): Promise<AuthResult> {
    let body: unknown;
    try {
      body = await this.options.client.validate(token);
    } catch (error) {
      if (!(error instanceof KeystoneUnavailable)) throw error;
      this.options.logger.error(
        { source, error: error.message },
        "Keystone unavailable: token not validated",
      );
      return { ok: false, status: 503, message: "The Keystone service is temporarily unavailable." };
    }
    if (body === null) return this.failed(source, "Keystone: token not found, expired or revoked");
    const parsed = KeystoneTokenBody.safeParse(body);
    if (!parsed.success) {
      this.options.logger.error({ source }, "Keystone's token body unreadable");
      return { ok: false, status: 503, message: "The Keystone service is temporarily unavailable." };
    }
    const now = this.now();
    const verdict = identityFromToken(parsed.data, {
      serviceProjectName: this.options.serviceProjectName,
      now,
    });
    if (!verdict.ok) return this.failed(source, verdict.reason);
    const until = Math.min(verdict.value.expiresAt, now + this.options.cacheWindowMs);
    if (this.options.cacheWindowMs > 0) {
      if (this.cache.size >= this.options.cacheMaxEntries) this.evict(now);
      this.cache.set(key, { value: verdict.value, until });
    }
    return { ok: true, identity: verdict.value.identity };
  }

  /** Drops ended entries, then (still full) the oldest one. */
  private evict(now: number): void {
    for (const [key, entry] of this.cache) if (entry.until <= now) this.cache.delete(key);
    if (this.cache.size < this.options.cacheMaxEntries) return;
    const oldest = this.cache.keys().next().value;
    if (oldest !== undefined) this.cache.delete(oldest);
  }

  private failed(source: string, reason: string): AuthResult {
    this.options.logger.warn({ source, reason }, "authentication failed");
    return this.refuse(reason);
  }

  get cacheSize(): number {
    return this.cache.size;
  }
}
