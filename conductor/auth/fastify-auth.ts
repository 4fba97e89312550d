import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import type { Authenticator } from "./authenticator.ts";
import { NOAUTH_IDENTITY, type Identity } from "./identity.ts";
import { allowed } from "./policy.ts";
import type { Logger } from "../../shared/log.ts";
import { claimsIdentity, hasPeerHeaders, type PeerAuth } from "./peer-identity.ts";
import { TooManyTokens, type TokenService } from "./tokens.ts";

declare module "fastify" {
  interface FastifyRequest {
    /** Who is asking (set before any handler runs; noauth: the system administrator). */
    identity: Identity;
    /** The client's address a peer conductor asserted for a call it forwarded (verified), else "". */
    forwardedFor: string;
  }
}

/**
 * Routes anyone may call, by their route pattern (not the raw URL, so no path trick reaches a protected
 * handler through a public prefix): version discovery as in Ironic, the agent's lookup and a ramdisk's inspection data, and the boot and
 * image files that firmware and the ramdisk fetch, local or from the Glance cache (temporary URLs carry
 * their own signature).
 */
// the dashboard's page, script and stylesheet carry no data: the page signs in, then calls the API
const PUBLIC_ROUTES = new Set([
  "/",
  "/v1",
  "/v1/lookup",
  "/v1/continue_inspection",
  "/boot/*",
  "/images/*",
  "/image-cache/*",
  "/ui/",
  "/ui/app.js",
  "/ui/app.css",
]);

/** Who calls a public route with auth on: no role, so every policy refuses. */
const ANONYMOUS: Identity = { user: "anonymous", role: null, project: null, method: "http_basic" };

/**
 * The address a request is accounted to (failed-login limits, node history): the TCP peer, or for a call a
 * peer conductor forwarded (its MAC verified), the client's address that peer saw: one peer never stands for
 * all its clients.
 */
export function clientAddress(request: FastifyRequest): string {
  return request.forwardedFor || request.ip;
}

export const REALM = 'Basic realm="Baremetal API"';

/** The body Ironic's basic-auth middleware answers with (not the API's faultstring envelope). */
export function authErrorBody(status: number, message: string): { error: { message: string; code: number } } {
  return { error: { message, code: status } };
}

const TokenBody = z
  .object({
    ttl_s: z
      .number()
      .int()
      .positive()
      .max(31 * 24 * 3600)
      .optional(),
  })
  .strict()
  .nullish();

async function refuse(
  reply: FastifyReply,
  result: { status: number; message: string; retryAfterS?: number; wwwAuthenticate?: string },
): Promise<FastifyReply> {
  if (result.status === 503) {
    // Keystone down: Ironic's API envelope, as its app answers keystonemiddleware's HTTPServiceUnavailable
    const fault = { faultcode: "Server", faultstring: result.message, debuginfo: null };
    return reply.code(503).send({ error_message: JSON.stringify(fault) });
  }
  if (result.wwwAuthenticate !== undefined) {
    // keystonemiddleware's refusal: its body, and where to get a token
    if (result.status === 401) reply.header("WWW-Authenticate", result.wwwAuthenticate);
    return reply.code(result.status).send({
      error: { code: result.status, title: "Unauthorized", message: result.message },
    });
  }
  // NOTE: a browser answers WWW-Authenticate: Basic with its own password prompt, even for fetch(); the
  // dashboard asks for credentials itself and says so with X-Requested-With, as XHR clients commonly do.
  const fromScript = reply.request.headers["x-requested-with"] === "XMLHttpRequest";
  if (result.status === 401 && !fromScript) reply.header("WWW-Authenticate", REALM);
  if (result.retryAfterS !== undefined) reply.header("Retry-After", String(result.retryAfterS));
  return reply.code(result.status).send(authErrorBody(result.status, result.message));
}

/**
 * The conductor's authentication: one onRequest hook sets `request.identity` or answers 400/401/429, and the
 * bearer-token routes (an Anvil extension) when tokens are on. Authorization is per route (policy.ts).
 */
export function registerAuth(
  app: FastifyInstance,
  auth: {
    authenticator: Authenticator;
    tokens?: TokenService;
    /** The user's entry a new token is bound to (UserStore.credential). */
    credential?: (user: string) => string | undefined;
    /** Verifies calls other conductors forward (absent: no cluster secret). */
    peers?: { auth: PeerAuth; self: () => string };
  },
  logger?: Logger,
): void {
  // fastify wants null for an object decorator; the hook below always sets it
  app.decorateRequest("identity", null as unknown as Identity);
  app.decorateRequest("forwardedFor", "");
  const { authenticator, tokens, peers } = auth;
  // NOTE: first of all: a forwarded call's identity is a peer's assertion, never a client's
  app.addHook("onRequest", async (request, reply) => {
    if (!hasPeerHeaders(request.headers)) return undefined;
    // without a secret, noauth keeps the bare "served here" mark (anyone is an administrator anyway)
    if (!peers && authenticator.strategy === "noauth" && !claimsIdentity(request.headers)) return undefined;
    const check = peers
      ? peers.auth.verify({ method: request.method, url: request.url, self: peers.self() }, request.headers)
      : ({ ok: false, reason: "no cluster secret configured here" } as const);
    if (!check.ok) {
      logger?.warn(
        { source: request.ip, reason: check.reason, url: request.url },
        "forwarded identity refused",
      );
      return refuse(reply, { status: 401, message: "Forwarded identity refused" });
    }
    request.identity = check.asserted.identity;
    request.forwardedFor = check.asserted.client;
    return undefined;
  });
  if (authenticator.strategy === "noauth") {
    app.addHook("onRequest", async (request) => {
      if (!request.forwardedFor) request.identity = NOAUTH_IDENTITY;
    });
  } else {
    app.addHook("onRequest", async (request, reply) => {
      if (request.forwardedFor) return; // a peer's verified assertion: policy applies to it as is
      if (request.routeOptions.url !== undefined && PUBLIC_ROUTES.has(request.routeOptions.url)) {
        request.identity = ANONYMOUS;
        return;
      }
      const header = request.headers.authorization;
      const authToken = request.headers["x-auth-token"];
      const result = await authenticator.authenticate({
        authorization: header,
        authToken: Array.isArray(authToken) ? authToken[0] : authToken,
        source: clientAddress(request),
      });
      if (!result.ok) return refuse(reply, result);
      request.identity = result.identity;
    });
  }
  if (tokens && auth.credential) registerTokenRoutes(app, { tokens, credential: auth.credential });
}

function registerTokenRoutes(
  app: FastifyInstance,
  auth: { tokens: TokenService; credential: (user: string) => string | undefined },
): void {
  const { tokens, credential } = auth;
  const mayManage = (request: FastifyRequest, user: string): boolean =>
    request.identity.user === user || allowed("baremetal:node:create", request.identity);
  const notFound = (reply: FastifyReply, id: string) =>
    reply.code(404).send(authErrorBody(404, `Token ${id} could not be found.`));

  app.post("/v1/auth/tokens", async (request, reply) => {
    // a token must come from a password: a stolen token cannot extend itself
    if (request.identity.method !== "http_basic")
      return refuse(reply, { status: 401, message: "Tokens are issued for a user name and password" });
    const body = TokenBody.parse(request.body);
    const entry = credential(request.identity.user);
    if (entry === undefined) return refuse(reply, { status: 401, message: "Incorrect username or password" });
    let issued: Awaited<ReturnType<TokenService["issue"]>>;
    try {
      issued = await tokens.issue(request.identity.user, entry, body?.ttl_s);
    } catch (error) {
      if (error instanceof TooManyTokens) return reply.code(409).send(authErrorBody(409, error.message));
      throw error;
    }
    return reply.code(201).header("Cache-Control", "no-store").send({
      id: issued.id,
      token: issued.token,
      user: issued.user,
      created_at: issued.createdAt,
      expires_at: issued.expiresAt,
    });
  });

  app.get("/v1/auth/tokens", async (request) => ({
    tokens: (await tokens.list())
      .filter((t) => mayManage(request, t.user))
      .map((t) => ({ id: t.id, user: t.user, created_at: t.createdAt, expires_at: t.expiresAt })),
  }));

  app.delete<{ Params: { id: string } }>("/v1/auth/tokens/:id", async (request, reply) => {
    const record = await tokens.get(request.params.id);
    if (!record || !mayManage(request, record.user)) return notFound(reply, request.params.id);
    await tokens.revoke(record.id);
    return reply.code(204).send();
  });
}
