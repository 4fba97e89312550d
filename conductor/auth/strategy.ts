import type { Logger } from "../../shared/log.ts";
import type { ConductorConfig } from "../config.ts";
import { HttpBasicAuthenticator, noAuth, type Authenticator } from "./authenticator.ts";
import { isPostgresUrl } from "../db/open-store.ts";
import type { TokenStore } from "../db/store.ts";
import { PeerAuth, readClusterSecret } from "./peer-identity.ts";
import { TokenService } from "./tokens.ts";
import { UserStore, rolesFileFor } from "./user-store.ts";
import { isLoopback } from "../listen-address.ts";
import { readFileSync, statSync } from "node:fs";
import { KeystoneAuthenticator, KeystoneClient } from "./keystone.ts";

export interface ConductorAuth {
  authenticator: Authenticator;
  /** Releases what the strategy holds open (Keystone's connection pool). */
  close?: () => Promise<void>;
  tokens?: TokenService;
  /** The user's entry a new token is bound to. */
  credential?: (user: string) => string | undefined;
  /** Anvil's own Keystone token, for the services it calls (Glance); never handed to a node or logged. */
  serviceToken?: () => Promise<string>;
}

export class AuthConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "AuthConfigError";
  }
}

/**
 * The authentication the conductor runs with. No strategy configured: noauth, but only on loopback (and it
 * says so); any other address needs http_basic, or noauth named explicitly.
 * @throws AuthConfigError, InvalidUserFile, ZodError (bad roles file)
 */
export function resolveAuth(config: ConductorConfig, logger: Logger, tokenStore: TokenStore): ConductorAuth {
  const { auth } = config;
  const strategy = auth.auth_strategy;
  if (strategy === undefined || strategy === "noauth") {
    if (strategy === undefined && !isLoopback(config.host)) {
      throw new AuthConfigError(
        `listening on ${config.host} needs an auth strategy: --auth-strategy http_basic --http-basic-auth-user-file FILE, or --auth-strategy noauth to let anyone who reaches the port do anything`,
      );
    }
    logger.warn(
      { auth_strategy: "noauth", host: config.host },
      strategy === undefined
        ? "no auth strategy configured: noauth, listening on loopback only"
        : "auth_strategy=noauth: anyone who reaches the API has full control",
    );
    return { authenticator: noAuth };
  }
  if (strategy === "keystone") return keystoneAuth(config, logger);
  const userFile = auth.http_basic_auth_user_file;
  if (userFile === undefined)
    throw new AuthConfigError("auth_strategy=http_basic needs http_basic_auth_user_file");
  const rolesFile = rolesFileFor(userFile, auth.rolesFile);
  const tokens = new TokenService({ store: tokenStore, ttlS: auth.tokenTtlS });
  // the store reloads before the authenticator exists (at start): the hook finds it once it does
  const late: { authenticator?: HttpBasicAuthenticator } = {};
  const users = new UserStore({
    userFile,
    rolesFile,
    onReload: (generation, error) => {
      late.authenticator?.clearCache();
      if (error !== null)
        logger.error({ userFile, rolesFile, error }, "user files not reloaded, keeping the last good ones");
      else if (generation > 1) logger.info({ userFile, rolesFile }, "user files reloaded");
    },
  });
  const authenticator = new HttpBasicAuthenticator({
    users,
    tokens,
    logger,
    cacheTtlMs: auth.credentialCacheTtlS * 1000,
    maxFailures: auth.maxFailedLogins,
    failureWindowMs: auth.failedLoginWindowS * 1000,
  });
  late.authenticator = authenticator;
  if (rolesFile === null)
    logger.warn({ userFile }, "http_basic without a roles file: every user is a system administrator");
  logger.info({ auth_strategy: "http_basic", userFile, rolesFile }, "authentication on");
  return { authenticator, tokens, credential: (user) => users.credential(user) };
}

/** The service user's password from its file, which must not be readable by group or others. */
function readPasswordFile(path: string): string {
  const mode = statSync(path).mode;
  if ((mode & 0o077) !== 0)
    throw new AuthConfigError(
      `keystone.password_file ${path} is readable by others (mode ${(mode & 0o777).toString(8)}); chmod 600 it`,
    );
  const password = readFileSync(path, "utf8").replace(/\r?\n$/, "");
  if (!password) throw new AuthConfigError(`keystone.password_file ${path} is empty`);
  return password;
}

function keystoneAuth(config: ConductorConfig, logger: Logger): ConductorAuth {
  const k = config.keystone;
  if (k.authUrl === undefined)
    throw new AuthConfigError("auth_strategy=keystone needs keystone.auth_url (--keystone-auth-url)");
  if (k.passwordFile === undefined)
    throw new AuthConfigError(
      "auth_strategy=keystone needs keystone.password_file (--keystone-password-file): the service user's password",
    );
  const client = new KeystoneClient({
    credentials: {
      authUrl: k.authUrl,
      username: k.username,
      password: readPasswordFile(k.passwordFile),
      userDomainName: k.userDomainName,
      projectName: k.projectName,
      projectDomainName: k.projectDomainName,
    },
    timeoutMs: k.timeoutS * 1000,
    maxConnections: k.maxConnections,
  });
  const authenticator = new KeystoneAuthenticator({
    client,
    logger,
    wwwAuthenticateUri: k.wwwAuthenticateUri ?? k.authUrl,
    serviceProjectName: k.serviceProjectName,
    cacheWindowMs: k.cacheWindowS * 1000,
    cacheMaxEntries: k.cacheMaxEntries,
  });
  logger.info(
    { auth_strategy: "keystone", auth_url: k.authUrl, username: k.username, cache_window_s: k.cacheWindowS },
    "authentication on",
  );
  return { authenticator, close: () => client.close(), serviceToken: () => client.serviceToken() };
}

/**
 * The MACs that let conductors assert a forwarded call's identity to each other: from the cluster secret
 * file, or (without one) from a key the database holds for the cluster, loaded at start. PostgreSQL means a
 * cluster: with http_basic or keystone it needs the secret file from the start.
 * @throws AuthConfigError, Error (unreadable, short or group-readable secret file)
 */
export function clusterPeers(config: ConductorConfig): PeerAuth {
  const file = config.cluster.secretFile;
  if (file !== undefined) return new PeerAuth({ secret: readClusterSecret(file) });
  const strategy = config.auth.auth_strategy;
  if ((strategy === "http_basic" || strategy === "keystone") && isPostgresUrl(config.databasePath))
    throw new AuthConfigError(
      `${strategy} on a PostgreSQL database (a cluster) needs cluster.secret_file (--cluster-secret-file): a file of at least 32 random bytes, mode 600, the same on every conductor`,
    );
  // keyed from the database at start: every forwarded call is signed, so a client's bare forwarding
  // header is refused even under noauth
  return new PeerAuth({});
}
