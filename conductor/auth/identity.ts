import { z } from "zod";

/** Ironic's default roles; each implies the ones after it (Keystone's implied roles). */
export const ROLES = ["admin", "member", "reader"] as const;
export const Role = z.enum(ROLES);
export type Role = z.infer<typeof Role>;

/** One line of the roles file: a user without a project is system scoped (sees the fleet). */
export const RoleEntry = z
  .object({
    role: Role,
    project: z.string().min(1).max(255).optional(),
  })
  .strict();
export type RoleEntry = z.infer<typeof RoleEntry>;

/** The roles/projects file kept beside the htpasswd file (YAML or JSON). */
export const RolesFile = z
  .object({
    users: z.record(z.string().min(1).max(255), RoleEntry).default({}),
  })
  .strict();
export type RolesFile = z.infer<typeof RolesFile>;

/** Who is asking, once authenticated. */
export interface Identity {
  user: string;
  /** null: no role at all (a user absent from the roles file): every policy refuses. */
  role: Role | null;
  /** null: system scope. */
  project: string | null;
  method: "noauth" | "http_basic" | "token" | "keystone";
}

/** noauth answers every request as the system administrator, as Ironic's noauth does. */
export const NOAUTH_IDENTITY: Identity = { user: "noauth", role: "admin", project: null, method: "noauth" };

/** Whether `role` includes `wanted` (admin ⊃ member ⊃ reader). */
export function hasRole(role: Role | null, wanted: Role): boolean {
  if (role === null) return false;
  return ROLES.indexOf(role) <= ROLES.indexOf(wanted);
}
