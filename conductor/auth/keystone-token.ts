import { z } from "zod";
import type { Identity, Role } from "./identity.ts";

/**
 * The parts of Keystone's v3 token body (GET /v3/auth/tokens) the policy needs; anything else Keystone adds
 * is ignored. Bounded: a hostile or broken identity server cannot hand the conductor huge role lists or names.
 */
const Name = z.string().min(1).max(255);
const Ref = z.object({ id: Name, name: Name.optional() });
const Domain = z.object({ id: Name.optional(), name: Name.optional() });

export const KeystoneTokenBody = z.object({
  token: z.object({
    expires_at: z.string().max(64),
    user: z.object({ id: Name, name: Name, domain: Domain.optional() }),
    roles: z.array(Ref).max(256).optional(),
    project: z.object({ id: Name, name: Name, domain: Domain.optional() }).optional(),
    domain: Ref.optional(),
    // Keystone writes {"all": true} for a system-scoped token
    system: z.object({ all: z.boolean().optional() }).optional(),
  }),
});
export type KeystoneTokenBody = z.infer<typeof KeystoneTokenBody>;

/** What a validated token stands for: who, until when (ms since the epoch). */
export interface KeystoneIdentity {
  identity: Identity;
  expiresAt: number;
}

export type TokenVerdict = { ok: true; value: KeystoneIdentity } | { ok: false; reason: string };

const RANK: readonly Role[] = ["admin", "member", "reader"];

/** The strongest of Ironic's roles the token carries (Keystone lists implied roles too), or null. */
function strongest(roles: readonly string[]): Role | null {
  return RANK.find((role) => roles.includes(role)) ?? null;
}

/**
 * The policy identity of a token Keystone validated (pure):
 * - system scope (`system.all`): the system persona of the strongest role (admin, member, reader);
 * - project scope: that role in the project, which the policy matches against nodes' owner and lessee;
 * - the `service` role, system scoped or in the service project: a system member, as Ironic's
 *   `rule:service_role` (its SYSTEM_MEMBER and SYSTEM_READER include it, SYSTEM_ADMIN does not);
 * - unscoped and domain-scoped tokens: refused (Ironic's rules have no domain persona).
 */
export function identityFromToken(
  body: KeystoneTokenBody,
  options: { serviceProjectName: string; now: number },
): TokenVerdict {
  const { token } = body;
  const expiresAt = Date.parse(token.expires_at);
  if (!Number.isFinite(expiresAt)) return { ok: false, reason: "token expiry unreadable" };
  if (expiresAt <= options.now) return { ok: false, reason: "token expired" };
  const roles = (token.roles ?? []).map((r) => r.name ?? "");
  const role = strongest(roles);
  const service = roles.includes("service");
  const user = token.user.name;
  const systemMember = (): TokenVerdict => ({
    ok: true,
    value: {
      identity: { user, role: "member", project: null, method: "keystone" },
      expiresAt,
    },
  });
  if (token.system?.all === true) {
    if (service && role !== "admin") return systemMember();
    return { ok: true, value: { identity: { user, role, project: null, method: "keystone" }, expiresAt } };
  }
  if (token.project) {
    if (service && token.project.name === options.serviceProjectName) return systemMember();
    return {
      ok: true,
      value: { identity: { user, role, project: token.project.id, method: "keystone" }, expiresAt },
    };
  }
  return { ok: false, reason: token.domain ? "domain-scoped token" : "unscoped token" };
}
