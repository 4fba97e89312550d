import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { rootCertificates } from "node:tls";
import { Agent, request as httpRequest } from "undici";
import { clientAddress } from "../auth/fastify-auth.ts";
import { PEER_HEADERS, type PeerAuth } from "../auth/peer-identity.ts";
import { BodyTooLarge, readBounded } from "../../shared/read-bounded.ts";
import { ConductorError } from "../errors.ts";
import type { ApiDeps } from "./context.ts";

/** Set on a forwarded request: the receiver serves it itself (one hop, even if two rings disagree briefly). */
export const FORWARDED_BY = PEER_HEADERS.by;

/**
 * The node a request names, when its route calls an operation that runs on the node's owner (the route
 * declares the operation; the operation declares `onOwner`).
 */
function ownerBoundNode(request: FastifyRequest): string | undefined {
  if (request.routeOptions.config.operation?.onOwner !== true) return undefined;
  const params = request.params as { ident?: unknown } | undefined;
  return typeof params?.ident === "string" ? params.ident : undefined;
}

/**
 * Headers that describe the hop, not the request. `expect: 100-continue` (curl sends it with bodies over 1 KiB)
 * was answered by this server already, and the HTTP client refuses to send it or `upgrade` on.
 */
const HOP_HEADERS = new Set([
  "host",
  "connection",
  "content-length",
  "transfer-encoding",
  "keep-alive",
  "expect",
  "upgrade",
]);

/**
 * What the client's credentials are not forwarded with: the owner trusts the signed identity instead, so a
 * password or token never travels a second hop.
 */
const CREDENTIAL_HEADERS = new Set(["authorization", "cookie", "proxy-authorization"]);

function forwardedHeaders(
  request: FastifyRequest,
  peer: { from: string; to: string; auth?: PeerAuth },
): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(request.headers)) {
    if (value === undefined || HOP_HEADERS.has(name) || name.startsWith("x-anvil-forwarded-")) continue;
    if (peer.auth && CREDENTIAL_HEADERS.has(name)) continue;
    headers[name] = Array.isArray(value) ? value.join(", ") : value;
  }
  if (!peer.auth) return { ...headers, [FORWARDED_BY]: peer.from };
  const signed = peer.auth.sign(
    { method: request.method, url: request.url, from: peer.from, to: peer.to },
    { identity: request.identity, client: clientAddress(request) },
  );
  return { ...headers, ...signed };
}

/** How long the owner may take to answer a forwarded call before it is served here. */
const OWNER_TIMEOUT_MS = 30_000;

/** The most an owner's answer may hold: node actions answer in a few kB; a peer gone wrong must not fill memory. */
export const MAX_OWNER_ANSWER_BYTES = 8 * 1024 * 1024;

/** The answer's bytes, or a 502 once they pass `max` (the rest is not read). */
async function ownerAnswer(body: AsyncIterable<Uint8Array>, max: number): Promise<Buffer> {
  try {
    return await readBounded(body, max);
  } catch (error) {
    if (error instanceof BodyTooLarge)
      throw new ConductorError(502, `The node's conductor answered with more than ${max} bytes.`);
    throw error;
  }
}

/**
 * Sends node actions to the conductor owning the node on the hash ring, so power, management and
 * provisioning run where the node's periodic work and agent session live, and relays the owner's answer
 * unchanged (status, headers, body: Ironic's error envelope included). Served here when this conductor owns
 * the node, when no live owner has a URL, or when the owner cannot be reached (its takeover is under way; the
 * lock still keeps the node safe). Registers a preHandler, and an onClose that drops the pooled connections.
 */
export function forwardToOwner(app: FastifyInstance, deps: ApiDeps): void {
  // NOTE: one keep-alive pool per owner, reused by every forwarded call; undici's request skips the WHATWG
  // fetch layer, which the routing bench measured as about half of the hop's cost.
  const owners = new Agent({
    keepAliveTimeout: 60_000,
    headersTimeout: OWNER_TIMEOUT_MS,
    bodyTimeout: OWNER_TIMEOUT_MS,
    // conductors of one cluster serve certificates from one CA, often a private one: trust it beside the
    // system's roots, or a TLS cluster would silently serve every call where it landed
    ...(deps.tls?.trust === undefined ? {} : { connect: { ca: [...rootCertificates, deps.tls.trust] } }),
  });
  app.addHook("onClose", async () => owners.close());
  app.addHook("preHandler", async (request: FastifyRequest, reply: FastifyReply) => {
    if (request.headers[FORWARDED_BY] !== undefined) return undefined;
    const ident = ownerBoundNode(request);
    if (ident === undefined) return undefined;
    const node = await deps.store.getNode(ident);
    if (!node) return undefined; // the route itself answers 404
    const owner = deps.membership.ownerOf(node);
    if (!owner?.url || owner.identity === deps.membership.identity) return undefined;
    if (!deps.peers && deps.auth !== undefined && deps.auth.authenticator.strategy !== "noauth") {
      // the owner could not tell who asked: served here (the node lock keeps it safe); start refuses this set-up
      // once another conductor is up, so this is only the moment before one joins
      return undefined;
    }
    let response: Awaited<ReturnType<typeof httpRequest>>;
    try {
      response = await httpRequest(`${owner.url}${request.url}`, {
        method: request.method,
        headers: forwardedHeaders(request, {
          from: deps.membership.identity,
          to: owner.identity,
          auth: deps.peers,
        }),
        body: request.body === undefined ? undefined : JSON.stringify(request.body),
        dispatcher: owners,
      });
    } catch (error) {
      deps.logger.warn(
        { err: error, node: node.uuid, owner: owner.hostname },
        "owner unreachable; serving here",
      );
      return undefined;
    }
    // the owner has the call from here on: a failure reading its answer is not a reason to run it twice
    const body = await ownerAnswer(response.body, MAX_OWNER_ANSWER_BYTES);
    for (const [name, value] of Object.entries(response.headers)) {
      if (value !== undefined && !HOP_HEADERS.has(name)) void reply.header(name, value);
    }
    await reply.code(response.statusCode).send(body);
    return reply;
  });
}
