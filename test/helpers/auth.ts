import bcrypt from "bcryptjs";
import { writeFileSync } from "node:fs";
import { stringify } from "yaml";

export interface TestUser {
  name: string;
  password: string;
  role?: "admin" | "member" | "reader";
  project?: string;
}

/** An htpasswd line as Apache's `htpasswd -B` writes it ($2y$, cost 4 to keep tests quick). */
export function htpasswdLine(user: string, password: string): string {
  return `${user}:$2y$${bcrypt.hashSync(password, 4).slice(4)}`;
}

/** Writes the htpasswd file and (for users with a role) roles.yaml beside it. */
export function writeUserFiles(
  dir: string,
  users: readonly TestUser[],
): { userFile: string; rolesFile: string } {
  const userFile = `${dir}/htpasswd`;
  const rolesFile = `${dir}/roles.yaml`;
  writeFileSync(userFile, users.map((u) => htpasswdLine(u.name, u.password)).join("\n") + "\n");
  const roles: Record<string, { role: string; project?: string }> = {};
  for (const u of users)
    if (u.role) roles[u.name] = { role: u.role, ...(u.project ? { project: u.project } : {}) };
  writeFileSync(rolesFile, stringify({ users: roles }));
  return { userFile, rolesFile };
}

export const basic = (user: string, password: string): Record<string, string> => ({
  Authorization: `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`,
});
